import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** Where a function's code lives, grouped the way the benchmark reports it. */
function categorize(url: string, functionName: string): string {
  if (url === "") return functionName.startsWith("(") ? functionName : "(native)";
  const source = /\/src\/([a-z-]+)\//.exec(url);
  if (source !== undefined && source !== null && !url.includes("node_modules"))
    return `tollgate src/${source[1]}`;
  const module = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (module?.[1] !== undefined) return module[1];
  if (url.startsWith("node:")) return `node ${url.slice(5).split("/")[0]}`;
  return url;
}

/** Self time by code area and by function, from the `.cpuprofile` files in `folder` (idle excluded). */
export function summarizeCpuProfiles(folder: string, top = 25): string {
  const byCategory = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let total = 0;
  for (const file of readdirSync(folder).filter((name) => name.endsWith(".cpuprofile"))) {
    const profile = JSON.parse(readFileSync(join(folder, file), "utf8")) as CpuProfile;
    const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
    profile.samples.forEach((id, index) => {
      const node = nodes.get(id);
      const delta = profile.timeDeltas[index] ?? 0;
      if (node === undefined || node.callFrame.functionName === "(idle)") return;
      const { url, functionName, lineNumber } = node.callFrame;
      total += delta;
      const category = categorize(url, functionName);
      byCategory.set(category, (byCategory.get(category) ?? 0) + delta);
      const name = `${functionName || "(anonymous)"} ${url.replace(/^.*\/(node_modules|src)\//, "$1/")}:${lineNumber + 1}`;
      byFunction.set(name, (byFunction.get(name) ?? 0) + delta);
    });
  }
  const lines = (entries: Map<string, number>, count: number) =>
    [...entries]
      .sort((a, b) => b[1] - a[1])
      .slice(0, count)
      .map(([name, time]) => `  ${((100 * time) / total).toFixed(1).padStart(5)} %  ${name}`);
  return [
    `Busy CPU time profiled: ${(total / 1e6).toFixed(2)} s`,
    "By code area (self time):",
    ...lines(byCategory, 20),
    "By function (self time):",
    ...lines(byFunction, top),
  ].join("\n");
}
