// Command pricecatalog regenerates pricing/catalog_gen.go, the plugin's
// catalog of public list prices, from the public price database pinned in
// package-lock.json beside it (@pydantic/genai-prices, on npm): dump.mjs
// prints the providers' data as the package bundles it, this program
// converts it to Go source by the rules written in prices.go and match.go
// (docs/price-catalog.md says them for users), then prints what it left
// out and the choices it made.
//
//	cd tools && go run ./pricecatalog            # make prices
//	cd tools && go run ./pricecatalog -date 2026-12-07
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"
)

// providerOrder are the providers the catalog holds, in the order Lookup
// searches them: those whose APIs the plugin parses, then the OpenAI-shaped
// hosts of open models (openrouter left out: a reseller, its prices
// another's plus a margin).
var providerOrder = []string{
	"openai", "anthropic", "google", "aws", "azure", "mistral", "groq", "deepseek",
	"x-ai", "cohere", "together", "fireworks", "cerebras", "moonshotai", "perplexity",
}

func main() {
	dir := flag.String("dir", "pricecatalog", "the directory of dump.mjs and its node_modules (npm ci)")
	out := flag.String("out", "../pricing/catalog_gen.go", "the file to write")
	date := flag.String("date", time.Now().UTC().Format(time.DateOnly), "the generation date (YYYY-MM-DD): the prices in force on it")
	flag.Parse()
	if err := run(*dir, *out, *date); err != nil {
		fmt.Fprintln(os.Stderr, "pricecatalog:", err)
		os.Exit(1)
	}
}

func run(dir, out, date string) error {
	day, err := time.Parse(time.DateOnly, date)
	if err != nil {
		return fmt.Errorf("-date %q: not a date (YYYY-MM-DD)", date)
	}
	src, sum, err := generateFromPackage(dir, day)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, src, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s\n", out)
	sum.print(os.Stderr)
	return nil
}

// generateFromPackage is the catalog's source from the package installed in
// dir, with the prices in force on day.
func generateFromPackage(dir string, day time.Time) ([]byte, *summary, error) {
	cmd := exec.Command("node", append([]string{"dump.mjs"}, providerOrder...)...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	data, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("node dump.mjs in %s (its packages installed by make sdks, or npm ci): %w", dir, err)
	}
	s, err := readSource(data)
	if err != nil {
		return nil, nil, err
	}
	ids := make([]string, len(s.Providers))
	for i, p := range s.Providers {
		ids[i] = p.ID
	}
	if !slices.Equal(ids, providerOrder) {
		return nil, nil, fmt.Errorf("the dump has providers %v, not %v", ids, providerOrder)
	}
	return generate(s, day)
}
