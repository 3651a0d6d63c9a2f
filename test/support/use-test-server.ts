import { afterAll, beforeAll } from "vitest";
import { startTestServer, type TestServer, type TestServerOptions } from "./test-server.ts";

/**
 * A test server started before the file's tests and closed after them (beforeAll/afterAll):
 * call the answer for the server, once the tests run.
 */
export function useTestServer(options: TestServerOptions = {}): () => TestServer {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await startTestServer(options);
  });
  afterAll(async () => {
    await server?.close();
  });
  return () => {
    if (server === undefined) throw new Error("the test server is not started (use it within a test)");
    return server;
  };
}

/** A chat completion's answer, as the over-HTTP tests read it. */
export interface ChatCompletionBody {
  choices: {
    message: { content: string | null; tool_calls?: { function: { arguments: string } }[] };
    finish_reason: string;
  }[];
  usage: { completion_tokens: number };
}
