import { findFreePort } from "../../support/free-port.ts";
import {
  createUpstreamModelEntry,
  startTestServer,
  type TestServer,
  TINY_MODEL,
} from "../../support/test-server.ts";
import { type MockUpstream, startMockUpstream } from "./mock-upstream.ts";

/**
 * A test server with the tiny local model and two upstream models: `remote`, served by a new mock
 * upstream, and `down`, whose only endpoint refuses connections, with the local model as its
 * fallback (for what a local fallback does with a field only upstreams act on).
 */
export async function startUpstreamTestServer(ids: {
  remote: string;
  down: string;
}): Promise<{ upstream: MockUpstream; server: TestServer }> {
  const upstream = await startMockUpstream();
  const closedPort = await findFreePort();
  const down = createUpstreamModelEntry(ids.down, `http://127.0.0.1:${closedPort}/v1`);
  if (down.engine?.type === "openai") down.engine.fallbacks = [TINY_MODEL];
  const server = await startTestServer({
    extraModels: [createUpstreamModelEntry(ids.remote, upstream.baseUrl), down],
  });
  return { upstream, server };
}
