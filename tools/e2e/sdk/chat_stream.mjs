// chat_stream.mjs streams one chat completion through the gateway with the
// official OpenAI SDK, as an application would: stream: true and nothing
// else (no stream_options, the SDK's default). It prints one JSON line per
// chunk the SDK hands over, then {"done":true}.
//
//   OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 KEY=... node chat_stream.mjs
//
// Environment: KEY (sent as x-api-key, which the test configuration limits
// by), MOCK_USAGE and MOCK_EVENTS (the mock LLM's x-mock-usage and
// x-mock-events), MOCK_DELAY_MS (its pause between events), and STOP_AFTER:
// stop reading after that many chunks and abort the request, as a client
// that goes away mid-stream does.
import OpenAI from "openai";

const headers = { "x-api-key": process.env.KEY };
if (process.env.MOCK_USAGE) headers["x-mock-usage"] = process.env.MOCK_USAGE;
if (process.env.MOCK_EVENTS) headers["x-mock-events"] = process.env.MOCK_EVENTS;
if (process.env.MOCK_DELAY_MS) headers["x-mock-delay-ms"] = process.env.MOCK_DELAY_MS;

const client = new OpenAI({ apiKey: "sk-e2e", defaultHeaders: headers, maxRetries: 0, timeout: 30000 });
const stopAfter = Number(process.env.STOP_AFTER || 0);

const stream = await client.chat.completions.create({
  model: "gpt-4o-mini",
  messages: [{ role: "user", content: "Write a short poem about rate limits." }],
  stream: true,
});
let n = 0;
for await (const chunk of stream) {
  console.log(JSON.stringify(chunk));
  n++;
  if (stopAfter && n >= stopAfter) {
    stream.controller.abort();
    break;
  }
}
console.log(JSON.stringify({ done: true, chunks: n }));
