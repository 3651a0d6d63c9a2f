/**
 * How a request's tools and response format become one node-llama-cpp generation.
 *
 * node-llama-cpp offers two ways to shape output, and they do not combine: `functions` (the chat
 * wrapper documents them in the prompt, and the model may call them in its own call syntax, whose
 * parameters the library then constrains by grammar) or one `grammar` for the whole response.
 * Neither can force a call. So each request gets exactly one of these plans:
 *
 * | request                                          | plan             | finish on a natural end |
 * |--------------------------------------------------|------------------|-------------------------|
 * | no tools, or `tool_choice: none`; text format    | `text`           | stop                    |
 * | tools with `auto`; text format                   | `functions`      | tool_calls if it called, else stop |
 * | `json_object` / `json_schema`, no tools offered  | `json`           | stop                    |
 * | tools with `auto`; `json_object` / `json_schema` | `call-or-json`   | tool_calls if it called, else stop |
 * | a named function, or `required` with one tool    | `tool-arguments` | tool_calls              |
 * | `required` with several tools                    | `tool-envelope`  | tool_calls              |
 *
 * - `functions`: tools go to LlamaChat as `functions` (parameters converted to the grammar subset);
 *   the model's calls come back as `functionCalls`, their parameters stream through
 *   `onFunctionCallParamsChunk`.
 * - `tool-arguments`: the whole response is forced by a grammar to be the function's arguments
 *   object, so the call cannot be skipped. The response text is the arguments and streams as
 *   tool-call deltas.
 * - `tool-envelope`: the grammar forces `{"name": <one of the tool names>, "arguments": <that tool's
 *   arguments>}` (a `oneOf` per tool, so the arguments match the chosen tool); a streaming scanner
 *   reports the name when it closes and passes the arguments value through as deltas. One call.
 * - In both forced plans the chat wrapper does not document the tools (it only does so for
 *   `functions`), so the system message gets a short instruction naming the function(s) with their
 *   descriptions and parameter schemas: the model then knows what it is filling in.
 * - `json`: the response is forced by a grammar: any JSON object for `json_object`, the schema for
 *   `json_schema`.
 * - `call-or-json`: tools with `auto` and a JSON format (what agents with structured output send:
 *   call tools until done, then answer in the schema). A grammar and functions cannot share a
 *   generation, so the grammar offers both, as llama.cpp's generic tool format does: the model writes
 *   `{"name": <tool>, "arguments": <its arguments>}` (one call) or `{"response": <the answer in the
 *   format>}`, told so by a system instruction like a forced call's. The scanner streams the
 *   arguments as tool-call deltas, or the response value as the content, so a client sees a call or
 *   JSON content, never the envelope. A forced tool choice (`required`, named) wins over the format,
 *   which only concerns content, and a forced call has none.
 * - Schemas are checked while planning, in `prepare`, before anything is reserved or generated: an
 *   invalid one (convert-json-schema-to-gbnf.ts), or one whose grammar would take llama.cpp long to
 *   parse (its ranges, see count-grammar-repeats.ts), is a 400 `invalid_value` naming
 *   `response_format.json_schema.schema` or `tools[i].function.parameters`, for every tool of the
 *   request whether or not the plan uses it. A function's arguments are always a JSON object: a
 *   parameters root without `type` becomes an object, one of another type is refused.
 * - Grammars end only where the JSON closes, so output that ends naturally always parses, even from
 *   a random-weight model. Stop strings are not applied to grammar plans: a stop string inside a
 *   JSON string would cut it.
 */
import type { ChatHistoryItem, ChatModelFunctions, GbnfJsonSchema } from "node-llama-cpp";
import { AppError } from "../../errors/app-error.ts";
import type { ChatRequest, JsonSchema, ToolDefinition } from "../engine.ts";
import { requireObjectParameters } from "../require-object-parameters.ts";
import { convertChatHistory } from "./convert-chat-history.ts";
import { convertJsonSchemaToGbnf } from "./convert-json-schema-to-gbnf.ts";
import { createToolsBudget, type SharedBudget, spendGrammarRepeats } from "./schema-conversion-budget.ts";

/** How one request is generated; see the module comment. */
export type GenerationPlan =
  | { kind: "text" }
  | { kind: "functions"; functions: ChatModelFunctions }
  | { kind: "json"; schema: GbnfJsonSchema }
  | { kind: "tool-arguments"; toolName: string; schema: GbnfJsonSchema }
  | { kind: "tool-envelope"; schema: GbnfJsonSchema }
  /** `answer`: the format's converted schema, which the envelope's `response` holds. */
  | { kind: "call-or-json"; schema: GbnfJsonSchema; answer: GbnfJsonSchema };

/** A request turned into what LlamaChat gets: the history it renders and the plan it runs. */
export interface PlannedGeneration {
  plan: GenerationPlan;
  history: ChatHistoryItem[];
  /**
   * The converted arguments schema of each request tool declared with parameters, with the field it
   * came from (`tools[i].function.parameters`): what a grammar that fails to build is blamed on.
   */
  toolSchemas: ToolSchema[];
  /**
   * The system text a forced call adds to the prompt (its tools' names, descriptions and
   * parameters' JSON, whole): what the prompt's size check counts of those tools
   * (check-prompt-size.ts), keywords the grammar drops (`pattern`, `x-...`) included.
   */
  instruction?: string;
}

/** A tool's converted arguments schema and the request field it came from. */
export interface ToolSchema {
  param: string;
  schema: GbnfJsonSchema;
}

/** The arguments schema of a function declared without parameters: an empty object. */
const noParameters: JsonSchema = { type: "object", properties: {} };

/** A request's tool with its arguments schema, checked and converted once per request. */
interface PlannedTool {
  definition: ToolDefinition;
  /** The client's parameters with an object root (see {@link requireObjectParameters}), as documented. */
  parameters: JsonSchema;
  /** The converted grammar schema of the arguments; `undefined` for a tool declared without parameters. */
  argumentsSchema: GbnfJsonSchema | undefined;
}

/** Chooses the plan for `request` and builds the history it renders. */
export function planGeneration(request: ChatRequest): PlannedGeneration {
  const history = convertChatHistory(request.messages);
  // Every tool's schema is checked, used by this plan or not: an invalid one is an invalid request.
  // The tools share one budget (schema-conversion-budget.ts): each within its own, a request's
  // 128 tools could still take long to convert.
  const budget = createToolsBudget();
  const tools = request.tools.map((definition, index) => planTool(definition, index, budget));
  const toolSchemas = tools.flatMap(({ argumentsSchema }, index) =>
    argumentsSchema === undefined
      ? []
      : [{ param: `tools[${index}].function.parameters`, schema: argumentsSchema }],
  );
  return { ...choosePlan(request, tools, history), toolSchemas };
}

function choosePlan(
  request: ChatRequest,
  tools: readonly PlannedTool[],
  history: ChatHistoryItem[],
): Omit<PlannedGeneration, "toolSchemas"> {
  const choice = request.toolChoice;
  switch (choice.type) {
    case "function": {
      const tool = tools.find((candidate) => candidate.definition.name === choice.name);
      if (tool === undefined) {
        throw new AppError(
          "invalid_value",
          `tool_choice names the function '${choice.name}', which is not among the request's tools. Add it to tools or name one of them.`,
          { param: "tool_choice" },
        );
      }
      return planForcedCall([tool], history);
    }
    case "required":
      if (tools.length === 0) {
        throw new AppError(
          "invalid_value",
          "tool_choice 'required' needs at least one tool. Add tools or use tool_choice 'auto' or 'none'.",
          { param: "tool_choice" },
        );
      }
      return planForcedCall(tools, history);
    case "auto":
    case "none":
      break;
    default: {
      const unreachable: never = choice;
      throw new Error(`unknown tool choice ${JSON.stringify(unreachable)}`);
    }
  }

  const format = request.responseFormat;
  const offerTools = choice.type === "auto" && tools.length > 0;
  switch (format.type) {
    case "json_object": {
      const schema: GbnfJsonSchema = { type: "object", additionalProperties: true };
      if (offerTools) return planCallOrAnswer(tools, history, schema, "a JSON object");
      return { plan: { kind: "json", schema }, history };
    }
    case "json_schema": {
      const param = "response_format.json_schema.schema";
      const schema = convertJsonSchemaToGbnf(format.schema, { param });
      spendGrammarRepeats(schema, param);
      if (offerTools) {
        const described = `JSON that follows this schema: ${JSON.stringify(format.schema)}`;
        return planCallOrAnswer(tools, history, schema, described);
      }
      return { plan: { kind: "json", schema }, history };
    }
    case "text":
      break;
    default: {
      const unreachable: never = format;
      throw new Error(`unknown response format ${JSON.stringify(unreachable)}`);
    }
  }

  if (offerTools) {
    return { plan: { kind: "functions", functions: convertTools(tools) }, history };
  }
  return { plan: { kind: "text" }, history };
}

/** The request's stop strings that `plan` applies: none for grammar plans (see the module comment). */
export function planStopStrings(plan: GenerationPlan, request: ChatRequest): string[] {
  return plan.kind === "text" || plan.kind === "functions" ? request.stop.filter((stop) => stop !== "") : [];
}

function planTool(definition: ToolDefinition, index: number, budget: SharedBudget): PlannedTool {
  const param = `tools[${index}].function.parameters`;
  if (definition.parameters === undefined) {
    return { definition, parameters: noParameters, argumentsSchema: undefined };
  }
  const parameters = requireObjectParameters(definition.name, definition.parameters, param);
  const argumentsSchema = convertJsonSchemaToGbnf(parameters, { param, shared: budget });
  spendGrammarRepeats(argumentsSchema, param, budget);
  if (!describesOnlyObjects(argumentsSchema)) {
    throw new AppError(
      "invalid_value",
      `Invalid schema for the function '${definition.name}' in '${param}': its root allows values that are not JSON objects (through anyOf, oneOf or $ref), but a call's arguments are a JSON object. Make every alternative an object.`,
      { param },
    );
  }
  return { definition, parameters, argumentsSchema };
}

/** Whether every value a converted schema allows is an object (its `oneOf` branches and references followed). */
function describesOnlyObjects(root: GbnfJsonSchema): boolean {
  const definitions: Record<string, unknown> = "$defs" in root && isRecord(root.$defs) ? root.$defs : {};
  const visiting = new Set<string>();
  const check = (schema: unknown): boolean => {
    if (!isRecord(schema)) return false;
    if (typeof schema.$ref === "string") {
      const name = schema.$ref.slice("#/$defs/".length);
      // A reference back into one being checked adds no other kind of value.
      if (visiting.has(name)) return true;
      visiting.add(name);
      const result = check(definitions[name]);
      visiting.delete(name);
      return result;
    }
    if (Array.isArray(schema.oneOf)) return schema.oneOf.every(check);
    return schema.type === "object";
  };
  return check(root);
}

function planForcedCall(
  tools: readonly PlannedTool[],
  history: ChatHistoryItem[],
): Omit<PlannedGeneration, "toolSchemas"> {
  const instruction = describeForcedCall(tools);
  const instructedHistory = addSystemInstruction(history, instruction);
  const [only] = tools;
  if (tools.length === 1 && only !== undefined) {
    return {
      plan: { kind: "tool-arguments", toolName: only.definition.name, schema: forcedArgumentsSchema(only) },
      history: instructedHistory,
      instruction,
    };
  }
  const schema: GbnfJsonSchema = { oneOf: tools.map(callEnvelope) };
  return { plan: { kind: "tool-envelope", schema }, history: instructedHistory, instruction };
}

/** `{"name": <the tool's name>, "arguments": <its arguments>}`, one alternative of an envelope. */
function callEnvelope(tool: PlannedTool): GbnfJsonSchema {
  return {
    type: "object",
    properties: { name: { const: tool.definition.name }, arguments: forcedArgumentsSchema(tool) },
  };
}

/**
 * The `call-or-json` plan (see the module comment): one call of any tool, or `{"response": ...}`
 * holding the answer in the format's converted `answer` schema, which `described` names to the model.
 */
function planCallOrAnswer(
  tools: readonly PlannedTool[],
  history: ChatHistoryItem[],
  answer: GbnfJsonSchema,
  described: string,
): Omit<PlannedGeneration, "toolSchemas"> {
  const instruction = [
    [
      "Reply with only a JSON object, in one of two forms.",
      `To answer: {"response": <your answer>}, where your answer is ${described}.`,
      'To call a function instead: {"name": <function name>, "arguments": <its arguments object>}.',
    ].join("\n"),
    ...tools.map(describeTool),
  ].join("\n\n");
  const schema: GbnfJsonSchema = {
    oneOf: [{ type: "object", properties: { response: answer } }, ...tools.map(callEnvelope)],
  };
  return {
    plan: { kind: "call-or-json", schema, answer },
    history: addSystemInstruction(history, instruction),
    instruction,
  };
}

/** A forced call writes its arguments itself: `{}` for a function without parameters. */
function forcedArgumentsSchema(tool: PlannedTool): GbnfJsonSchema {
  return tool.argumentsSchema ?? { type: "object", properties: {} };
}

function convertTools(tools: readonly PlannedTool[]): ChatModelFunctions {
  // No prototype: a tool named `__proto__` set the object's prototype and was never offered.
  const functions: Record<string, ChatModelFunctions[string]> = Object.create(null);
  for (const { definition, argumentsSchema } of tools) {
    functions[definition.name] = {
      ...(definition.description === undefined ? {} : { description: definition.description }),
      // Without parameters the library renders and parses a call with no arguments ("{}" for us).
      params: argumentsSchema,
    };
  }
  return functions;
}

function describeTool({ definition, parameters }: PlannedTool): string {
  return [
    `Function "${definition.name}"${definition.description === undefined ? "" : `: ${definition.description}`}`,
    `Arguments JSON schema: ${JSON.stringify(parameters)}`,
  ].join("\n");
}

function describeForcedCall(tools: readonly PlannedTool[]): string {
  const [only] = tools;
  if (tools.length === 1 && only !== undefined) {
    return `Call the function "${only.definition.name}" now: reply with only the JSON object of its arguments.\n${describeTool(only)}`;
  }
  return [
    'Call one of these functions now: reply with only a JSON object {"name": <function name>, "arguments": <its arguments object>}.',
    ...tools.map(describeTool),
  ].join("\n\n");
}

/** Appends `instruction` to the first system message, or adds one at the start. */
function addSystemInstruction(history: ChatHistoryItem[], instruction: string): ChatHistoryItem[] {
  const first = history[0];
  if (first?.type === "system" && typeof first.text === "string") {
    return [{ type: "system", text: `${first.text}\n\n${instruction}` }, ...history.slice(1)];
  }
  return [{ type: "system", text: instruction }, ...history];
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
