/**
 * node-llama-cpp's JSON grammars let a schema's `integer` take an exponent, so "5e-3" (no
 * integer) and "8e9385351414791265" (Infinity once parsed) could come out of json_schema output
 * and of tool-call arguments alike. This takes the exponent out of its integer rule, once per
 * process, in the one class every JSON grammar is built from (ours through
 * `createGrammarForJsonSchema`, LlamaChat's for functions). node-llama-cpp is pinned to one
 * version; patch-integer-grammar.test.ts pins the rule, and fails if a new version moves it.
 */
const EXPONENT = ' ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?';

interface GbnfNumberClass {
  prototype: { allowFractional: boolean; getGrammar(): string };
}

let patching: Promise<boolean> | undefined;

/** Patches node-llama-cpp's number terminal; answers whether it could (else grammars are as shipped). */
export function patchIntegerGrammar(): Promise<boolean> {
  patching ??= (async () => {
    // The very module node-llama-cpp loads (same file URL, same instance); a file URL is not
    // subject to the package's exports map, which does not list it.
    const url = new URL("./utils/gbnfJson/terminals/GbnfNumber.js", import.meta.resolve("node-llama-cpp"));
    const { GbnfNumber } = (await import(url.href)) as { GbnfNumber: GbnfNumberClass };
    const original = GbnfNumber.prototype.getGrammar;
    if (typeof original !== "function") return false;
    GbnfNumber.prototype.getGrammar = function getGrammar(this: { allowFractional: boolean }) {
      const grammar = original.call(this);
      return this.allowFractional ? grammar : grammar.replace(EXPONENT, "");
    };
    return true;
  })().catch(() => false);
  return patching;
}
