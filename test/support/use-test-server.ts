import { afterAll, beforeAll } from "vitest";
import { startTestServer, type TestServer, type TestServerOptions } from "./test-server.ts";

/**
 * A test server started before the file's (or the describe's) tests and closed after them
 * (beforeAll/afterAll): call the answer for the server, once the tests run. `options` may be a
 * function, called in the beforeAll, for options that need what is only known then (a model file's
 * path, a fake upstream's address made by a beforeAll registered earlier). Vitest runs beforeAll
 * hooks in the order they were registered and afterAll hooks in the reverse order, so what is
 * started before this call is started before the server and closed after it.
 */
export function useTestServer(
  options: TestServerOptions | (() => TestServerOptions | Promise<TestServerOptions>) = {},
): () => TestServer {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await startTestServer(typeof options === "function" ? await options() : options);
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
