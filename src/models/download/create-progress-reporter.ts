import { cutText } from "../../errors/cut-text.ts";
import type { DownloadListener, DownloadProgress } from "./download-progress.ts";
import { formatBytes, formatDuration, formatRate } from "./format-download-figures.ts";

/**
 * Where progress goes: a terminal gets one line redrawn in place (`\r`, erase to the end of the
 * line); anything else gets whole lines, one every few seconds and at each tenth of the file.
 */
export type ProgressOutput =
  | { type: "terminal"; write(text: string): void; columns: number | undefined }
  | { type: "lines"; write(line: string): void };

/** A {@link DownloadListener} that draws progress; call `finish()` when the download ends. */
export interface ProgressReporter extends Required<DownloadListener> {
  /** Ends the redrawn line (terminal) or writes the last figures (lines). */
  finish(): void;
}

export interface ProgressReporterOptions {
  output: ProgressOutput;
  /** What is downloaded, such as the file name; starts every line. */
  label: string;
  /** Milliseconds clock; default `performance.now`. */
  now?: () => number;
  /** Lines mode: longest pause between lines. Default 5000. */
  lineIntervalMilliseconds?: number;
  /** Terminal mode: shortest pause between redraws. Default 100. */
  redrawIntervalMilliseconds?: number;
}

const barWidth = 24;

export function createProgressReporter(options: ProgressReporterOptions): ProgressReporter {
  const { output, label } = options;
  const now = options.now ?? (() => performance.now());
  const lineInterval = options.lineIntervalMilliseconds ?? 5000;
  const redrawInterval = options.redrawIntervalMilliseconds ?? 100;
  let session: { startedAt: number; startBytes: number } | undefined;
  let latest: DownloadProgress | undefined;
  let lastOutputAt = Number.NEGATIVE_INFINITY;
  let lastTenth = -1;
  let lineShown = false;
  let latestShown = false;

  const rateOf = (progress: DownloadProgress): number | undefined => {
    if (session === undefined) return undefined;
    const seconds = (now() - session.startedAt) / 1000;
    const bytes = progress.receivedBytes - session.startBytes;
    return seconds >= 0.5 && bytes > 0 ? bytes / seconds : undefined;
  };

  const describe = (progress: DownloadProgress): { amount: string; speed: string } => {
    const rate = rateOf(progress);
    const { receivedBytes, totalBytes } = progress;
    const left =
      rate !== undefined && totalBytes !== undefined && receivedBytes < totalBytes
        ? `, ${formatDuration((totalBytes - receivedBytes) / rate)} left`
        : "";
    return {
      amount:
        totalBytes === undefined
          ? formatBytes(receivedBytes)
          : `${formatBytes(receivedBytes)} of ${formatBytes(totalBytes)}`,
      speed: rate === undefined ? "" : `${formatRate(rate)}${left}`,
    };
  };

  const formatLine = (progress: DownloadProgress): string => {
    const { amount, speed } = describe(progress);
    const percent = percentOf(progress);
    const figures = percent === undefined ? amount : `${percent}% (${amount})`;
    return `${label}: ${figures}${speed === "" ? "" : `, ${speed}`}`;
  };

  const formatBar = (progress: DownloadProgress, columns: number | undefined): string => {
    const { amount, speed } = describe(progress);
    const percent = percentOf(progress);
    const filled = percent === undefined ? 0 : Math.round((percent / 100) * barWidth);
    const bar =
      percent === undefined ? "" : ` [${"#".repeat(filled)}${"-".repeat(barWidth - filled)}] ${percent}%`;
    const figures = `${bar} ${amount}${speed === "" ? "" : `  ${speed}`}`;
    // A terminal that reports no size (0 columns: `script` without one) counts as 80 wide.
    const width = (columns === undefined || columns <= 0 ? 80 : columns) - 1;
    const room = width - figures.length;
    if (room >= label.length) return `${label}${figures}`;
    if (room > 4) return `${cutText(label, room - 1)}…${figures}`;
    return figures.trimStart().slice(0, width);
  };

  const show = (progress: DownloadProgress) => {
    lastOutputAt = now();
    latestShown = true;
    if (output.type === "terminal") {
      output.write(`\r${formatBar(progress, output.columns)}\u001b[K`);
      lineShown = true;
    } else {
      output.write(formatLine(progress));
    }
  };

  return {
    onProgress(progress) {
      // A fresh session when the download starts, restarts from zero or resumes after a break.
      if (
        session === undefined ||
        latest === undefined ||
        progress.startBytes !== latest.startBytes ||
        progress.receivedBytes < latest.receivedBytes
      ) {
        session = { startedAt: now(), startBytes: progress.receivedBytes };
      }
      latest = progress;
      latestShown = false;
      const percent = percentOf(progress);
      const tenth = percent === undefined ? -1 : Math.floor(percent / 10);
      const elapsed = now() - lastOutputAt;
      if (output.type === "terminal") {
        if (elapsed >= redrawInterval || percent === 100) show(progress);
      } else if (elapsed >= lineInterval || tenth > lastTenth) {
        lastTenth = Math.max(lastTenth, tenth);
        show(progress);
      }
    },
    onNotice(message) {
      if (output.type === "terminal") {
        output.write(`${lineShown ? "\r\u001b[K" : ""}${message}\n`);
        lineShown = false;
        if (latest !== undefined) show(latest);
      } else {
        output.write(message);
      }
    },
    finish() {
      if (latest !== undefined && !latestShown) show(latest);
      if (output.type === "terminal" && lineShown) {
        output.write("\n");
        lineShown = false;
      }
    },
  };
}

function percentOf(progress: DownloadProgress): number | undefined {
  if (progress.totalBytes === undefined || progress.totalBytes === 0) return undefined;
  return Math.min(100, Math.floor((progress.receivedBytes / progress.totalBytes) * 100));
}
