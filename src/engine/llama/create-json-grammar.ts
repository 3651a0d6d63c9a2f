import type { GbnfJsonSchema, Llama, LlamaGrammar } from "node-llama-cpp";

/**
 * What node-llama-cpp appends to the root rule of every JSON-schema grammar: four newlines, then
 * any more, with a stop trigger on the four and `trimWhitespaceSuffix`, as a workaround for models
 * that would not stop. The model then has to write those newlines after the JSON: tokens that the
 * client never sees were generated and billed (3 or 4 on the test models, half as much again as
 * a short answer), and a `max_tokens` that covered the JSON but not them ended a complete answer
 * with `finish_reason: "length"`.
 */
const SHIPPED_ROOT_SUFFIX = ' "\\n\\n\\n\\n" [\\n]*';

type GrammarTextBuilder = (schema: GbnfJsonSchema) => string;

let loading: Promise<GrammarTextBuilder | undefined> | undefined;

/**
 * node-llama-cpp's JSON grammar text builder: the very module it loads (the number rules that
 * patch-grammar-terminals.ts bounds apply), reached by file URL since the package does not export it.
 */
function loadGrammarTextBuilder(): Promise<GrammarTextBuilder | undefined> {
  loading ??= (async () => {
    const url = new URL(
      "./utils/gbnfJson/getGbnfGrammarForGbnfJsonSchema.js",
      import.meta.resolve("node-llama-cpp"),
    );
    const module = (await import(url.href)) as { getGbnfGrammarForGbnfJsonSchema?: unknown };
    const build = module.getGbnfGrammarForGbnfJsonSchema;
    return typeof build === "function" ? (build as GrammarTextBuilder) : undefined;
  })().catch(() => undefined);
  return loading;
}

/**
 * The grammar text for `schema` with nothing after the JSON: once the value is complete, llama.cpp's
 * sampler allows only an end-of-generation token, so generation ends right there, as llama.cpp's
 * own server ends its grammar-constrained answers. `undefined` where the text is not as the pinned
 * node-llama-cpp version writes it (create-json-grammar.test.ts fails then).
 */
export async function buildJsonGrammarText(schema: GbnfJsonSchema): Promise<string | undefined> {
  const build = await loadGrammarTextBuilder();
  if (build === undefined) return undefined;
  const text = build(schema);
  const rootEnd = text.indexOf("\n");
  const root = rootEnd === -1 ? text : text.slice(0, rootEnd);
  if (!root.startsWith("root ::= ") || !root.endsWith(SHIPPED_ROOT_SUFFIX)) return undefined;
  return root.slice(0, -SHIPPED_ROOT_SUFFIX.length) + text.slice(root.length);
}

/**
 * The grammar that constrains output to `schema` (already in node-llama-cpp's subset) and ends
 * generation once the JSON value is complete; node-llama-cpp's own where that cannot be built.
 */
export async function createJsonGrammar(llama: Llama, schema: GbnfJsonSchema): Promise<LlamaGrammar> {
  const grammar = await buildJsonGrammarText(schema);
  if (grammar === undefined) return await llama.createGrammarForJsonSchema<GbnfJsonSchema>(schema);
  return await llama.createGrammar({ grammar });
}
