import { describe, expect, it } from "vitest";
import { RedisOutageLog } from "../../src/cluster/redis-outage-log.ts";

function recordingLog() {
  const lines: { level: string; message: string | undefined }[] = [];
  const record = (level: string) => (_object: object, message?: string) => {
    lines.push({ level, message });
  };
  const log = new RedisOutageLog({
    logger: { info: record("info"), warn: record("warn"), error: record("error") },
    role: "rate limits",
    consequence: "requests are admitted without per-key rate limits",
  });
  return { log, lines };
}

describe("RedisOutageLog", () => {
  it("logs an outage once, and its end once", () => {
    const { log, lines } = recordingLog();
    log.failed(new Error("connect ECONNREFUSED 127.0.0.1:6391."));
    log.failed(new Error("connect ECONNREFUSED 127.0.0.1:6391"));
    log.recovered();
    log.recovered();
    expect(lines).toEqual([
      {
        level: "error",
        message:
          "Redis is unreachable (rate limits): connect ECONNREFUSED 127.0.0.1:6391. Until it is back, requests are admitted without per-key rate limits. Check that Redis runs and that TOLLGATE_REDIS_URL / redis: points at it.",
      },
      { level: "info", message: "Redis is reachable again (rate limits)." },
    ]);
  });

  // Regression: the line quoted ioredis's own words for a command sent on a dropped connection.
  it("says that the connection is down, not that ioredis's stream is not writeable", () => {
    const { log, lines } = recordingLog();
    log.failed(new Error("Stream isn't writeable and enableOfflineQueue options is false"));
    expect(lines[0]?.message).toMatch(
      /^Redis is unreachable \(rate limits\): the connection to it is down\. /,
    );
  });
});
