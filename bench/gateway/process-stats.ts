import { readFileSync } from "node:fs";

/** CPU time a process has used (user + system), in microseconds, from `/proc/PID/stat`. */
export function readCpuMicroseconds(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // Fields after the command name (which may hold spaces) start after the last ")".
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const user = Number(fields[11]);
    const system = Number(fields[12]);
    // Linux reports clock ticks of 1/100 s (USER_HZ) on every common platform.
    return ((user + system) * 1_000_000) / 100;
  } catch {
    return undefined;
  }
}

/** The most resident memory a process has had (`VmHWM`), in bytes. */
export function readPeakRssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(status);
    return match?.[1] === undefined ? undefined : Number(match[1]) * 1024;
  } catch {
    return undefined;
  }
}
