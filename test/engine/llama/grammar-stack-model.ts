/**
 * A model of the stacks llama.cpp keeps open while it reads text against a grammar, for the
 * expressions integerRangeGrammar writes (literals, digit classes, groups of alternatives,
 * `{m}`/`{m,n}` repetitions, which its parser turns into nested optional rules): each alternative
 * reached opens a stack, an optional repeat one more, and the end of the value counts as one. The
 * stack check (check-grammar-stacks.ts) counts a number as one leaf; this tells how many a range
 * really opens, against the 2000 the check allows.
 */
type Node =
  | { kind: "seq"; items: Node[] }
  | { kind: "alt"; options: Node[] }
  | { kind: "lit"; text: string }
  | { kind: "cls"; low: string; high: string }
  | { kind: "rep"; item: Node; least: number; most: number };

export function parseExpression(text: string): Node {
  let at = 0;
  const space = () => {
    while (text[at] === " ") at++;
  };
  const alternatives = (): Node => {
    const options = [sequence()];
    space();
    while (text[at] === "|") {
      at++;
      options.push(sequence());
      space();
    }
    return options.length === 1 ? (options[0] as Node) : { kind: "alt", options };
  };
  const sequence = (): Node => {
    const items: Node[] = [];
    for (;;) {
      space();
      const c = text[at];
      if (c === undefined || c === "|" || c === ")") break;
      let item: Node;
      if (c === "(") {
        at++;
        item = alternatives();
        space();
        at++; // ")"
      } else if (c === '"') {
        const end = text.indexOf('"', at + 1);
        item = { kind: "lit", text: text.slice(at + 1, end) };
        at = end + 1;
      } else if (c === "[") {
        item = { kind: "cls", low: text[at + 1] as string, high: text[at + 3] as string };
        at += 5;
      } else throw new Error(`unexpected ${c} at ${at}`);
      if (text[at] === "{") {
        const end = text.indexOf("}", at);
        const [least, most] = text
          .slice(at + 1, end)
          .split(",")
          .map(Number) as [number, number?];
        item = { kind: "rep", item, least, most: most ?? least };
        at = end + 1;
      }
      items.push(item);
    }
    return { kind: "seq", items };
  };
  return alternatives();
}

/** The elements still to match, the next one last. */
type Stack = readonly Node[];

/** The stacks `stack` stands for once expanded down to a character (or to nothing: the end). */
function expand(stack: Stack): Stack[] {
  const top = stack.at(-1);
  if (top === undefined) return [stack];
  const rest = stack.slice(0, -1);
  switch (top.kind) {
    case "lit":
      return top.text === "" ? expand(rest) : [stack];
    case "cls":
      return [stack];
    case "seq":
      return expand([...rest, ...[...top.items].reverse()]);
    case "alt":
      return top.options.flatMap((option) => expand([...rest, option]));
    case "rep":
      if (top.least > 0)
        return expand([...rest, { ...top, least: top.least - 1, most: top.most - 1 }, top.item]);
      if (top.most === 0) return expand(rest);
      return [...expand([...rest, { ...top, most: top.most - 1 }, top.item]), ...expand(rest)];
  }
}

function advance(stack: Stack, character: string): Stack[] {
  const top = stack.at(-1);
  const rest = stack.slice(0, -1);
  if (top?.kind === "lit" && top.text[0] === character)
    return expand([...rest, { kind: "lit", text: top.text.slice(1) }]);
  if (top?.kind === "cls" && character >= top.low && character <= top.high) return expand(rest);
  return [];
}

/** The most stacks open at once while `text` is read (the end of the value counted as one). */
export function mostStacks(expression: string, text: string): number {
  let stacks = expand([parseExpression(expression)]);
  let most = stacks.length;
  for (const character of text) {
    stacks = stacks.flatMap((stack) => advance(stack, character));
    most = Math.max(most, stacks.length);
  }
  if (!stacks.some((stack) => stack.length === 0)) throw new Error(`${text} not taken`);
  return most;
}
