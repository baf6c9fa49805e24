// client_call.mjs makes one call through the gateway with an official SDK,
// as an application would, with the SDK's own key header, and prints one
// JSON line of what the application can read: on success the usage and the
// quota headers, on an error its status, its type and the body the SDK
// parsed, and the headers it exposes.
//
//   SDK=openai|anthropic|gemini BASE_URL=http://127.0.0.1:PORT KEY=... node client_call.mjs
//
// The key goes where each SDK puts it (e2e.sdkKeyPlaces: Authorization:
// Bearer for OpenAI and Anthropic 1.x, x-goog-api-key for Gemini). Retries are off: the test
// sees the first answer; RETRIES=default leaves them as the SDK has them
// (OpenAI and Anthropic: 2 retries, waiting as the 429 says). MOCK_USAGE is
// the mock LLM's x-mock-usage. It prints how long the call took, in ms.
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";

const base = process.env.BASE_URL;
const key = process.env.KEY;
const mock = process.env.MOCK_USAGE ? { "x-mock-usage": process.env.MOCK_USAGE } : {};
const retries = process.env.RETRIES === "default" ? {} : { maxRetries: 0 };
const quotaHeaders = [
  "retry-after", "retry-after-ms",
  "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
  "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
  "ratelimit-policy", "ratelimit",
];

// headersOf picks the quota headers from a fetch Headers object.
function headersOf(h) {
  const out = {};
  for (const name of quotaHeaders) {
    const v = h?.get?.(name);
    if (v != null) out[name] = v;
  }
  return out;
}

async function openai() {
  const client = new OpenAI({ apiKey: key, baseURL: base + "/v1", defaultHeaders: mock, timeout: 30000, ...retries });
  try {
    const { data, response } = await client.chat.completions
      .create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "Hi" }] })
      .withResponse();
    return { ok: true, usage: data.usage, headers: headersOf(response.headers) };
  } catch (err) {
    if (!(err instanceof OpenAI.APIError)) throw err;
    return {
      ok: false, status: err.status, class: err.constructor.name, code: err.code, type: err.type,
      message: err.message, error: err.error, headers: headersOf(err.headers),
    };
  }
}

async function anthropic() {
  const client = new Anthropic({ apiKey: key, baseURL: base, defaultHeaders: mock, timeout: 30000, ...retries });
  try {
    const { data, response } = await client.messages
      .create({ model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "Hi" }] })
      .withResponse();
    return { ok: true, usage: data.usage, headers: headersOf(response.headers) };
  } catch (err) {
    if (!(err instanceof Anthropic.APIError)) throw err;
    return { ok: false, status: err.status, class: err.constructor.name, message: err.message, error: err.error, headers: headersOf(err.headers) };
  }
}

async function gemini() {
  const ai = new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base, headers: mock, timeout: 30000 } });
  try {
    const r = await ai.models.generateContent({ model: "gemini-2.5-flash", contents: "Hi" });
    return { ok: true, usage: r.usageMetadata };
  } catch (err) {
    // The Gemini SDK's error carries its status and the body, as text, in
    // its message: no headers.
    if (err?.name !== "ApiError") throw err;
    return { ok: false, status: err.status, class: err.name, message: err.message };
  }
}

const calls = { openai, anthropic, gemini };
const call = calls[process.env.SDK];
if (!call) throw new Error(`SDK must be one of ${Object.keys(calls).join(", ")}`);
const started = Date.now();
const result = await call();
console.log(JSON.stringify({ ...result, ms: Date.now() - started }));
