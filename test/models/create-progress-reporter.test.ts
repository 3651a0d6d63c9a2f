import { describe, expect, it } from "vitest";
import { createProgressReporter } from "../../src/models/download/create-progress-reporter.ts";

const megabyte = 1_000_000;
const eraseLine = "\u001b[K";

/** A redrawn line without its leading carriage return and trailing erase. */
function stripControl(text: string): string {
  return text.replace(/^\r/, "").replaceAll(eraseLine, "");
}

function createClock() {
  let time = 0;
  return { now: () => time, advance: (milliseconds: number) => (time += milliseconds) };
}

describe("progress lines (not a terminal)", () => {
  it("writes a line at each tenth and every few seconds, with size, rate and time left", () => {
    const clock = createClock();
    const lines: string[] = [];
    const reporter = createProgressReporter({
      output: { type: "lines", write: (line) => lines.push(line) },
      label: "model.gguf",
      now: clock.now,
    });
    const total = 100 * megabyte;
    reporter.onProgress({ receivedBytes: 0, totalBytes: total, startBytes: 0 });
    for (let received = megabyte; received <= total; received += megabyte) {
      clock.advance(100); // 10 MB/s
      reporter.onProgress({ receivedBytes: received, totalBytes: total, startBytes: 0 });
    }
    reporter.finish();
    expect(lines[0]).toBe("model.gguf: 0% (0 B of 100.0 MB)");
    expect(lines[1]).toBe("model.gguf: 10% (10.0 MB of 100.0 MB), 10.0 MB/s, 9s left");
    expect(lines.at(-1)).toBe("model.gguf: 100% (100.0 MB of 100.0 MB), 10.0 MB/s");
    expect(lines).toHaveLength(11);
  });

  it("writes every few seconds when the size is unknown, and notices as lines", () => {
    const clock = createClock();
    const lines: string[] = [];
    const reporter = createProgressReporter({
      output: { type: "lines", write: (line) => lines.push(line) },
      label: "x",
      now: clock.now,
      lineIntervalMilliseconds: 5000,
    });
    reporter.onNotice("Resuming at 5.0 MB.");
    for (let second = 1; second <= 12; second++) {
      clock.advance(1000);
      reporter.onProgress({ receivedBytes: second * megabyte, totalBytes: undefined, startBytes: 0 });
    }
    expect(lines).toEqual([
      "Resuming at 5.0 MB.",
      "x: 1.0 MB",
      "x: 6.0 MB, 1.0 MB/s",
      "x: 11.0 MB, 1.0 MB/s",
    ]);
  });
});

describe("progress bar (terminal)", () => {
  it("redraws one line in place and ends it with a line break", () => {
    const clock = createClock();
    const writes: string[] = [];
    const reporter = createProgressReporter({
      output: { type: "terminal", write: (text) => writes.push(text), columns: 100 },
      label: "hf:org/repo:Q4_K_M",
      now: clock.now,
    });
    reporter.onProgress({ receivedBytes: 0, totalBytes: 4 * megabyte, startBytes: 0 });
    clock.advance(1000);
    reporter.onProgress({ receivedBytes: megabyte, totalBytes: 4 * megabyte, startBytes: 0 });
    clock.advance(10); // too soon to redraw
    reporter.onProgress({ receivedBytes: megabyte + 1, totalBytes: 4 * megabyte, startBytes: 0 });
    reporter.onNotice("Verifying the SHA-256 checksum.");
    reporter.finish();
    expect(writes[1]).toBe(
      "\rhf:org/repo:Q4_K_M [######------------------] 25% 1.0 MB of 4.0 MB  1.0 MB/s, 3s left\u001b[K",
    );
    expect(writes).toHaveLength(5);
    expect(writes[2]).toBe("\r\u001b[KVerifying the SHA-256 checksum.\n");
    expect(writes[3]).toMatch(/^\rhf:org\/repo:Q4_K_M \[/);
    expect(writes[4]).toBe("\n");
    for (const text of writes.slice(0, 2)) expect(stripControl(text).length).toBeLessThan(100);
  });

  it("shortens the label to fit a narrow terminal", () => {
    const writes: string[] = [];
    const reporter = createProgressReporter({
      output: { type: "terminal", write: (text) => writes.push(text), columns: 60 },
      label: "hf:some-organisation/a-rather-long-repository-name-GGUF:Q4_K_M",
      now: () => 0,
    });
    reporter.onProgress({ receivedBytes: 0, totalBytes: megabyte, startBytes: 0 });
    const line = stripControl(writes[0] ?? "");
    expect(line.length).toBeLessThanOrEqual(59);
    expect(line).toMatch(/… \[-+\] 0% 0 B of 1\.0 MB$/);
  });

  // Regression: the label was cut at a count of code units, which could split an emoji in half.
  it("shortens a label of emoji without cutting one in half", () => {
    for (const columns of [60, 61]) {
      const writes: string[] = [];
      const reporter = createProgressReporter({
        output: { type: "terminal", write: (text) => writes.push(text), columns },
        label: `hf:org/${"😀".repeat(40)}`,
        now: () => 0,
      });
      reporter.onProgress({ receivedBytes: 0, totalBytes: megabyte, startBytes: 0 });
      const line = stripControl(writes[0] ?? "");
      expect(line).toMatch(/^hf:org\/(😀)+… \[-+\] 0% 0 B of 1\.0 MB$/u);
      expect(line.isWellFormed()).toBe(true);
    }
  });

  it("draws the whole line on a terminal that reports no size (0 columns)", () => {
    const writes: string[] = [];
    const reporter = createProgressReporter({
      output: { type: "terminal", write: (text) => writes.push(text), columns: 0 },
      label: "hf:org/repo:Q4_K_M",
      now: () => 0,
    });
    reporter.onProgress({ receivedBytes: 0, totalBytes: megabyte, startBytes: 0 });
    expect(stripControl(writes[0] ?? "")).toBe(
      "hf:org/repo:Q4_K_M [------------------------] 0% 0 B of 1.0 MB",
    );
  });
});
