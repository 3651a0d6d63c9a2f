import { parseRegexPattern, type RegexNode } from "../../../src/engine/llama/parse-regex-pattern.ts";

/**
 * `count` random strings that `pattern` matches (anchored at both ends): a walk of its parsed tree,
 * each alternative and each count of a repetition (up to 6 beyond its least) as likely, a class's
 * characters drawn from its ranges.
 */
export function samplePattern(pattern: string, count: number, random: (below: number) => number): string[] {
  const branches = parseRegexPattern(pattern);
  if (branches === undefined) throw new Error(`not a pattern the grammar writes: ${pattern}`);
  const sample = (node: RegexNode): string => {
    switch (node.kind) {
      case "chars": {
        const [first, last] = node.ranges[random(node.ranges.length)] as readonly [number, number];
        return String.fromCodePoint(first + random(Math.min(last - first + 1, 1000)));
      }
      case "sequence":
        return node.items.map(sample).join("");
      case "alternatives":
        return sample(node.options[random(node.options.length)] as RegexNode);
      case "repeat": {
        const most = Math.min(node.max ?? node.min + 6, node.min + 6);
        let text = "";
        for (let copies = node.min + random(most - node.min + 1); copies > 0; copies--)
          text += sample(node.item);
        return text;
      }
    }
  };
  return Array.from({ length: count }, () =>
    sample(branches[random(branches.length)]?.body ?? { kind: "sequence", items: [] }),
  );
}
