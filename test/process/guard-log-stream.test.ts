import { spawn } from "node:child_process";
import { once } from "node:events";
import { closeSync, existsSync, openSync } from "node:fs";
import { join } from "node:path";
import { pino } from "pino";
import { describe, expect, it } from "vitest";
import { guardLogStream, isSilencedLogStream } from "../../src/process/guard-log-stream.ts";

describe("guardLogStream", () => {
  it.skipIf(!existsSync("/dev/full"))(
    "silences a destination whose write failed for good, and says so once",
    async () => {
      const full = openSync("/dev/full", "w");
      const destination = pino.destination({ dest: full, sync: false });
      const logger = pino(destination);
      guardLogStream(logger);
      logger.info("lost");
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(isSilencedLogStream(destination)).toBe(true);
      // Further lines, a fatal one's flush included, are dropped without a throw or a wait.
      logger.info("lost too");
      logger.fatal("lost as well");
      closeSync(full);
    },
  );
});

describe("a line at level fatal while the log's reader takes nothing more (a full pipe)", () => {
  it("is flushed for a bounded time, not for ever, and the log is then silenced", async () => {
    // In a child whose stdout this test never reads: pino's flush after a fatal line, while an
    // earlier line larger than the pipe was still being written, retried every 100 ms for ever.
    const guard = join(import.meta.dirname, "../../src/process/guard-log-stream.ts");
    const script = `
      import { pino } from "pino";
      import { guardLogStream } from ${JSON.stringify(guard)};
      const logger = pino();
      guardLogStream(logger);
      logger.info({ padding: "x".repeat(200_000) }, "larger than the pipe");
      logger.fatal({ padding: "y".repeat(200_000) }, "crash");
      process.stderr.write("after the fatal line\\n");
    `;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], {
      cwd: join(import.meta.dirname, "../.."),
      stdio: ["ignore", "pipe", "pipe"],
    });
    child.stdout.pause();
    let stderr = "";
    child.stderr.on("data", (data: Buffer) => {
      stderr += data.toString();
    });
    const killer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const [code, signal] = (await once(child, "exit")) as [number | null, string | null];
    clearTimeout(killer);
    expect({ code, signal, stderr }).toEqual({
      code: 0,
      signal: null,
      stderr:
        "tollgate: the log cannot be written (EAGAIN); logging stops, the server goes on\nafter the fatal line\n",
    });
  });
});
