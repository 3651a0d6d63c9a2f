import { closeSync, existsSync, openSync } from "node:fs";
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
