import { Pool } from "undici";
import { startMockUpstream, streamText } from "/work/main/test/engine/openai/mock-upstream.ts";
const up = await startMockUpstream(streamText(["a"]));
const pool = new Pool(`http://127.0.0.1:${up.port}`, { pipelining: 1, headersTimeout: 0, bodyTimeout: 0 });
for (let i = 0; i < 10; i++) {
  const r = await pool.request({ method: "POST", path: "/v1/chat/completions", body: "{}", headers: {"content-type": "application/json"} });
  r.body.setEncoding("utf8");
  for await (const c of r.body) {}
}
console.log(up.requests.map((r) => r.clientPort));
await pool.close(); await up.close();
