import type { LlamaGrammar } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import { checkGrammarStacks } from "./check-grammar-stacks.ts";
import type { GrammarCache } from "./create-grammar-cache.ts";
import type { GenerationPlan, ToolSchema } from "./plan-generation.ts";

/**
 * The grammar of a grammar plan, built (or taken from the cache) before generation so that a schema
 * llama.cpp cannot parse is a 400 naming the field it came from. The tools of a `functions` plan are
 * built too, though LlamaChat builds its own grammars for them: it does so only once the model
 * starts a call, where a schema that fails would end the generation with a 500.
 */
export async function createPlanGrammar(options: {
  plan: GenerationPlan;
  toolSchemas: readonly ToolSchema[];
  grammars: GrammarCache;
}): Promise<LlamaGrammar | undefined> {
  const { plan, toolSchemas, grammars } = options;
  const build = async ({ param, schema }: ToolSchema) => {
    try {
      return await grammars.get(schema);
    } catch (error) {
      // The hint about cycles only where there are references to make them.
      const cycles = JSON.stringify(schema).includes('"$ref"')
        ? ` A '$ref' that leads back to itself with nothing in between (such as {"$ref": "#"}, or definitions that only refer to each other) cannot be generated: make every such cycle pass through an object property or an array item, or simplify the schema.`
        : " Simplify the schema.";
      throw new AppError(
        "invalid_value",
        `The JSON schema in '${param}' cannot be turned into a grammar (${error instanceof Error ? error.message : String(error)}).${cycles}`,
        { param, cause: error },
      );
    }
  };
  switch (plan.kind) {
    case "text":
      return undefined;
    case "functions":
      for (const tool of toolSchemas) await build(tool);
      return undefined;
    case "json":
      return await build({ param: "response_format.json_schema.schema", schema: plan.schema });
    case "tool-arguments":
    case "tool-envelope":
    case "call-or-json":
      // Each tool's schema (and the format's) is checked alone (convert-json-schema-to-gbnf.ts);
      // an envelope opens its alternatives together, counted before llama.cpp builds it.
      if (plan.kind !== "tool-arguments") checkGrammarStacks(plan.schema, "tools");
      try {
        return await grammars.get(plan.schema);
      } catch {
        // The envelope's grammar holds the tools' schemas: blame the first one that fails alone.
        for (const tool of toolSchemas) await build(tool);
        if (plan.kind === "call-or-json")
          await build({ param: "response_format.json_schema.schema", schema: plan.answer });
        return await build({ param: "tools", schema: plan.schema });
      }
    default: {
      const unreachable: never = plan;
      throw new Error(`unknown plan ${JSON.stringify(unreachable)}`);
    }
  }
}
