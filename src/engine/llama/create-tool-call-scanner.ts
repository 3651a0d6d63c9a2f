/** What one chunk of generated text held of a tool call. */
export interface ToolCallScan {
  /** The function name, in the chunk where the envelope's `name` string closed; else `undefined`. */
  name: string | undefined;
  /** The part of the chunk that belongs to the arguments JSON value ("" for none). */
  argumentsDelta: string;
  /** With `answer`: the part of the chunk that belongs to the envelope's `response` value ("" for none). */
  responseDelta: string;
}

/**
 * Finds a tool call's arguments in generated text as it streams, one character at a time, without
 * waiting for the whole text. Two shapes:
 * - `envelope: false`: the text is the arguments value itself (maybe with whitespace or a suffix
 *   around it); the value from its first character to its close is passed through.
 * - `envelope: true`: the text is `{"name": "<function>", "arguments": <value>}` (keys in any order,
 *   any whitespace); the name is reported when its string closes and the arguments value is
 *   passed through as it is generated.
 * - `envelope: true, answer: true`: the text is either such a call or `{"response": <value>}`, an
 *   answer instead of a call (plan-generation.ts, `call-or-json`); the response value is passed
 *   through as `responseDelta`, and no name is ever reported for it.
 * Text after the arguments (or response) value closes is ignored.
 */
export interface ToolCallScanner {
  push(text: string): ToolCallScan;
  /** True once the arguments (or response) value has closed. */
  readonly argumentsComplete: boolean;
  /** Everything passed through as arguments so far. */
  readonly argumentsText: string;
}

type Capture = "none" | "key" | "name" | "arguments";

export function createToolCallScanner(options: { envelope: boolean; answer?: boolean }): ToolCallScanner {
  // The depth at which the arguments value sits: 0 for a bare value, 1 inside the envelope.
  const argumentsDepth = options.envelope ? 1 : 0;
  let depth = 0;
  let inString = false;
  let escaped = false;
  /** Inside the envelope object: whether the next string at depth 1 is a key. */
  let expectingKey = false;
  let currentKey = "";
  let capture: Capture = "none";
  let stringBuffer = "";
  /** The arguments value started; `primitive` when it is a number or literal that ends by delimiter. */
  let argumentsState: "pending" | "container" | "string" | "primitive" | "complete" = "pending";
  let argumentsText = "";
  /** The envelope key whose value is passed through, once it starts. */
  let valueKey: "arguments" | "response" = "arguments";

  const inArgumentsPosition = () =>
    options.envelope
      ? depth === 1 &&
        !expectingKey &&
        (currentKey === "arguments" || (options.answer === true && currentKey === "response"))
      : depth === 0;

  const scanCharacter = (character: string, scan: { name: string | undefined; delta: string }) => {
    // A bare value is all there is; in an envelope the name may still follow the arguments.
    if (argumentsState === "complete" && !options.envelope) return;
    const capturingArguments = argumentsState !== "pending" && argumentsState !== "complete";

    if (inString) {
      if (capturingArguments) scan.delta += character;
      else if (capture !== "none") stringBuffer += character;
      if (escaped) {
        escaped = false;
        return;
      }
      if (character === "\\") {
        escaped = true;
        return;
      }
      if (character !== '"') return;
      inString = false;
      if (argumentsState === "string") {
        argumentsState = "complete";
      } else if (capture === "key") {
        currentKey = parseJsonString(stringBuffer);
      } else if (capture === "name") {
        scan.name = parseJsonString(stringBuffer);
      }
      capture = "none";
      return;
    }

    if (argumentsState === "primitive") {
      if (!/[\s,}\]]/.test(character)) {
        scan.delta += character;
        return;
      }
      // The delimiter that ends a number or literal still counts for the envelope around it.
      argumentsState = "complete";
      if (!options.envelope) return;
    }

    if (argumentsState === "pending" && inArgumentsPosition() && !/\s/.test(character) && character !== ":") {
      if (currentKey === "response") valueKey = "response";
      argumentsState =
        character === "{" || character === "[" ? "container" : character === '"' ? "string" : "primitive";
    }
    const inArguments = argumentsState !== "pending" && argumentsState !== "complete";
    if (inArguments) scan.delta += character;

    switch (character) {
      case '"':
        inString = true;
        stringBuffer = '"';
        if (!inArguments && options.envelope && depth === 1) {
          capture = expectingKey ? "key" : currentKey === "name" ? "name" : "none";
        }
        return;
      case "{":
      case "[":
        depth += 1;
        if (options.envelope && depth === 1) expectingKey = true;
        return;
      case "}":
      case "]":
        depth -= 1;
        if (argumentsState === "container" && depth === argumentsDepth) argumentsState = "complete";
        return;
      case ":":
        if (options.envelope && depth === 1) expectingKey = false;
        return;
      case ",":
        if (options.envelope && depth === 1) {
          expectingKey = true;
          currentKey = "";
        }
        return;
      default:
        return;
    }
  };

  return {
    get argumentsComplete() {
      return argumentsState === "complete";
    },
    get argumentsText() {
      return argumentsText;
    },
    push(text) {
      const scan = { name: undefined as string | undefined, delta: "" };
      for (const character of text) scanCharacter(character, scan);
      // Only one value is ever passed through: the chunk's delta is all of that value.
      if (valueKey === "response") return { name: scan.name, argumentsDelta: "", responseDelta: scan.delta };
      argumentsText += scan.delta;
      return { name: scan.name, argumentsDelta: scan.delta, responseDelta: "" };
    },
  };
}

function parseJsonString(literal: string): string {
  try {
    const value: unknown = JSON.parse(literal);
    return typeof value === "string" ? value : "";
  } catch {
    return "";
  }
}
