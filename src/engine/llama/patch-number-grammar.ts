/**
 * node-llama-cpp's JSON grammars let a number carry an exponent of up to 16 digits, so
 * "74786006.86E2378147571108908" (Infinity once parsed, refused by strict parsers) could come out
 * of json_schema and json_object output and of tool-call arguments alike, and an `integer` could
 * be "5e-3" (no integer) or have 16 digits (past `Number.MAX_SAFE_INTEGER`). This rewrites the two
 * number rules, once per process, in the one class every JSON grammar is built from (ours through
 * `createGrammarForJsonSchema`, LlamaChat's for function parameters, the "any JSON value" rule):
 * - an integer has at most 15 digits and no fraction or exponent: always a safe integer;
 * - any other number keeps its 16 digits and 16 decimals and may have an exponent of at most two
 *   digits: always a finite double (below 1e116). The exponent stays because a model that means
 *   6.02e23 could not write it out in 16 digits.
 * A rule that differs from the one shipped is left as it is; node-llama-cpp is pinned to one
 * version, and patch-number-grammar.test.ts pins the rules and fails if a new version moves them.
 */
const shippedRules = {
  integer: '"-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
  fractional: '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
};

const boundedRules = {
  integer: '"-"? ("0" | [1-9] [0-9]{0,14})',
  fractional: '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]?))?',
};

interface GbnfNumberClass {
  prototype: { allowFractional: boolean; getGrammar(): string };
}

let patching: Promise<boolean> | undefined;

/** Patches node-llama-cpp's number terminal; answers whether it could (else grammars are as shipped). */
export function patchNumberGrammar(): Promise<boolean> {
  patching ??= (async () => {
    // The very module node-llama-cpp loads (same file URL, same instance); a file URL is not
    // subject to the package's exports map, which does not list it.
    const url = new URL("./utils/gbnfJson/terminals/GbnfNumber.js", import.meta.resolve("node-llama-cpp"));
    const { GbnfNumber } = (await import(url.href)) as { GbnfNumber: GbnfNumberClass };
    const original = GbnfNumber.prototype.getGrammar;
    if (typeof original !== "function") return false;
    GbnfNumber.prototype.getGrammar = function getGrammar(this: { allowFractional: boolean }) {
      const grammar = original.call(this);
      const kind = this.allowFractional ? "fractional" : "integer";
      return grammar === shippedRules[kind] ? boundedRules[kind] : grammar;
    };
    return true;
  })().catch(() => false);
  return patching;
}
