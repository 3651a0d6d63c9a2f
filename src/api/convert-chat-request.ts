import { hasNulCharacter } from "../admin/has-nul-character.ts";
import { hideKeySecrets } from "../admin/read-key-reference.ts";
import type {
  ChatMessage,
  ChatRequest,
  JsonSchema,
  ResponseFormat,
  ToolChoice,
  ToolDefinition,
} from "../engine/engine.ts";
import { convertJsonSchemaToGbnf } from "../engine/llama/convert-json-schema-to-gbnf.ts";
import { createToolsBudget, type SharedBudget } from "../engine/llama/schema-conversion-budget.ts";
import { requireObjectParameters } from "../engine/require-object-parameters.ts";
import { AppError } from "../errors/app-error.ts";
import { shownValue } from "../errors/shown-value.ts";
import { checkSchemaSize, type RequestSchemaEntries } from "./check-schema-size.ts";
import { collectUpstreamExtras } from "./collect-upstream-extras.ts";
import type { ChatCompletionRequestBody, ChatMessageBody } from "./schemas/chat-completion-request.ts";

/** What the HTTP edge needs beyond the engine's request. */
export interface ChatCompletionOptions {
  model: string;
  stream: boolean;
  includeUsage: boolean;
  /** Choices asked for; engines that cannot do more than 1 refuse more. */
  choices: number;
  user: string | undefined;
  request: ChatRequest;
}

/** A message's text, and the texts of its parts where it was sent as parts. */
interface MessageText {
  text: string | null;
  parts?: string[];
}

/**
 * A message's content. An assistant's refusal, as OpenAI answers one (a `refusal` beside null or
 * empty content, or a `refusal` part) and a client replays it in the conversation, is taken as
 * what the assistant said, as vLLM takes it.
 */
function convertContent(message: ChatMessageBody, index: number): MessageText {
  const content = message.content;
  const refusal = message.role === "assistant" ? message.refusal : undefined;
  // Tollgate's own refusals come with content "" (an empty list of parts is as empty).
  if (
    typeof refusal === "string" &&
    (content === undefined ||
      content === null ||
      content === "" ||
      (Array.isArray(content) && content.length === 0))
  )
    return { text: refusal };
  if (content === undefined || content === null) return { text: null };
  if (typeof content === "string") return { text: content };
  const parts = content.map((part, partIndex) => {
    const param = `messages[${index}].content[${partIndex}]`;
    const field = part.type === "refusal" && message.role === "assistant" ? "refusal" : "text";
    if (part.type !== field) {
      throw new AppError(
        "invalid_value",
        `Invalid content part type '${shownValue(part.type)}' in '${param}': Tollgate's models take text parts only${message.role === "assistant" ? " (and refusal parts)" : ""}.`,
        { param: `${param}.type` },
      );
    }
    const text = part[field];
    if (typeof text !== "string") {
      throw new AppError("missing_required_parameter", `Missing required parameter: '${param}.${field}'.`, {
        param: `${param}.${field}`,
      });
    }
    return text;
  });
  // Joined as vLLM and llama.cpp's server join them, so that words of two parts do not run together.
  return parts.length === 0 ? { text: "" } : { text: parts.join("\n"), parts };
}

function convertMessage(message: ChatMessageBody, index: number): ChatMessage {
  const { text: content, parts } = convertContent(message, index);
  // The participant's name, for upstream models (a tool message's has no meaning there), and the
  // parts the content was sent as, which they get as sent.
  const named = {
    ...(message.name == null ? {} : { name: message.name }),
    ...(parts === undefined ? {} : { contentParts: parts }),
  };
  const requireContent = (): string => {
    if (content === null) {
      throw new AppError(
        "missing_required_parameter",
        `Missing required parameter: 'messages[${index}].content'.`,
        {
          param: `messages[${index}].content`,
        },
      );
    }
    return content;
  };
  switch (message.role) {
    case "system":
    case "developer":
      return { role: "system", content: requireContent(), ...named };
    case "user":
      return { role: "user", content: requireContent(), ...named };
    case "assistant": {
      const toolCalls = message.tool_calls?.map((call) => ({
        id: call.id,
        name: call.function.name,
        arguments: call.function.arguments,
      }));
      if (content === null && (toolCalls === undefined || toolCalls.length === 0)) requireContent();
      return toolCalls && toolCalls.length > 0
        ? { role: "assistant", content, toolCalls, ...named }
        : { role: "assistant", content, ...named };
    }
    case "tool": {
      if (message.tool_call_id == null) {
        throw new AppError(
          "missing_required_parameter",
          `Missing required parameter: 'messages[${index}].tool_call_id'. A tool message answers the tool call with that id.`,
          { param: `messages[${index}].tool_call_id` },
        );
      }
      return {
        role: "tool",
        content: requireContent(),
        toolCallId: message.tool_call_id,
        ...(parts === undefined ? {} : { contentParts: parts }),
      };
    }
    default:
      throw new AppError("invalid_value", `Invalid value for 'messages[${index}].role'.`, {
        param: `messages[${index}].role`,
      });
  }
}

function convertToolChoice(body: ChatCompletionRequestBody, tools: ToolDefinition[]): ToolChoice {
  const choice = body.tool_choice;
  if (choice === undefined || choice === null) return { type: tools.length > 0 ? "auto" : "none" };
  if (typeof choice === "string") {
    // `auto` is the contract's default, and some clients send it with every request: with no
    // tools it means what `none` does. `required` cannot be met without a tool.
    if (choice === "auto" && tools.length === 0) return { type: "none" };
    if (choice !== "none" && tools.length === 0) {
      throw new AppError(
        "invalid_value",
        `Invalid value for 'tool_choice': '${choice}' needs a non-empty 'tools' list.`,
        {
          param: "tool_choice",
        },
      );
    }
    return { type: choice };
  }
  const name = choice.function.name;
  if (!tools.some((tool) => tool.name === name)) {
    throw new AppError(
      "invalid_value",
      `Invalid value for 'tool_choice': no function named '${shownValue(name)}' in 'tools'.`,
      { param: "tool_choice.function.name" },
    );
  }
  return { type: "function", name };
}

function convertResponseFormat(
  body: ChatCompletionRequestBody,
  request: RequestSchemaEntries,
): ResponseFormat {
  const format = body.response_format;
  if (format === undefined || format === null) return { type: "text" };
  switch (format.type) {
    case "text":
    case "json_object":
      return { type: format.type };
    case "json_schema": {
      const jsonSchema = format.json_schema;
      if (jsonSchema === undefined) {
        throw new AppError(
          "missing_required_parameter",
          "Missing required parameter: 'response_format.json_schema'.",
          {
            param: "response_format.json_schema",
          },
        );
      }
      if (jsonSchema.schema != null)
        checkSchema(jsonSchema.schema, "response_format.json_schema.schema", request);
      return {
        type: "json_schema",
        name: jsonSchema.name,
        ...(jsonSchema.description == null ? {} : { description: jsonSchema.description }),
        schema: jsonSchema.schema ?? { type: "object" },
        ...(jsonSchema.strict === undefined || jsonSchema.strict === null
          ? {}
          : { strict: jsonSchema.strict }),
      };
    }
  }
}

/**
 * Refuses a JSON Schema that is too large (see {@link checkSchemaSize}) or is not valid JSON Schema (an unknown `type`, `required`
 * that is not a list of names, a `$ref` that does not resolve, a minimum above its maximum, ...)
 * with 400 naming `param`: a field error, found with the others before anything about the model
 * (SPEC section 11), for every engine. The grammar converter is where validity is defined (the
 * local engine builds its grammar with it); its result is not needed here. What only a local
 * grammar cannot enforce (counts above 2000, references to other documents) is the local
 * engine's to refuse: an upstream model takes such schemas.
 */
function checkSchema(
  schema: unknown,
  param: string,
  request: RequestSchemaEntries,
  shared?: SharedBudget,
): void {
  checkSchemaSize(schema, param, request);
  convertJsonSchemaToGbnf(schema, {
    param,
    grammarLimits: false,
    ...(shared === undefined ? {} : { shared }),
  });
}

/** {@link checkSchema}, and a root that declares a type declares an object: arguments are a JSON object. */
function checkToolParameters(
  name: string,
  parameters: JsonSchema,
  param: string,
  request: RequestSchemaEntries,
  shared: SharedBudget,
): void {
  checkSchema(parameters, param, request, shared);
  requireObjectParameters(name, parameters, param);
}

/**
 * Refuses OpenAI's legacy function calling (`functions`, `function_call`), which an upstream would
 * answer in the legacy `message.function_call` shape that Tollgate does not render, and which
 * ignored would give a legacy client plain text where it expects a call. `null` is "not sent".
 */
function refuseLegacyFunctions(body: ChatCompletionRequestBody): void {
  const param =
    body.functions != null ? "functions" : body.function_call != null ? "function_call" : undefined;
  if (param === undefined) return;
  throw new AppError(
    "invalid_value",
    `Legacy function calling ('functions', 'function_call') is not supported: send the functions as 'tools' (each {"type": "function", "function": {...}}) and choose with 'tool_choice' instead.`,
    { param },
  );
}

/**
 * Turns a schema-valid request body into the engine's request plus the edge's options,
 * applying the contract's defaults and the rules that span fields.
 */
export function convertChatRequest(body: ChatCompletionRequestBody): ChatCompletionOptions {
  refuseLegacyFunctions(body);
  const stream = body.stream ?? false;
  const streamOptions = body.stream_options;
  if (streamOptions !== undefined && streamOptions !== null && !stream) {
    throw new AppError("invalid_value", "'stream_options' is only allowed when 'stream' is true.", {
      param: "stream_options",
    });
  }
  if (
    body.max_tokens != null &&
    body.max_completion_tokens != null &&
    body.max_tokens !== body.max_completion_tokens
  ) {
    throw new AppError(
      "invalid_value",
      "'max_tokens' and 'max_completion_tokens' are the same setting and differ here; send only one.",
      { param: "max_completion_tokens" },
    );
  }
  if (body.top_logprobs != null && body.logprobs !== true) {
    throw new AppError("invalid_value", "'top_logprobs' is only allowed when 'logprobs' is true.", {
      param: "top_logprobs",
    });
  }
  const tools: ToolDefinition[] = (body.tools ?? []).map((tool) => ({
    name: tool.function.name,
    ...(tool.function.description == null ? {} : { description: tool.function.description }),
    ...(tool.function.parameters == null ? {} : { parameters: tool.function.parameters }),
    ...(tool.function.strict === undefined || tool.function.strict === null
      ? {}
      : { strict: tool.function.strict }),
  }));
  const names = new Set<string>();
  const schemaEntries: RequestSchemaEntries = { entries: 0 };
  // The tools' constant checks and pattern work are one request's (each tool had them all).
  const toolsBudget = createToolsBudget(false);
  tools.forEach((tool, index) => {
    if (tool.parameters !== undefined)
      checkToolParameters(
        tool.name,
        tool.parameters,
        `tools[${index}].function.parameters`,
        schemaEntries,
        toolsBudget,
      );
    if (names.has(tool.name)) {
      throw new AppError("invalid_value", `Duplicate function name '${shownValue(tool.name)}' in 'tools'.`, {
        param: `tools[${index}].function.name`,
      });
    }
    names.add(tool.name);
  });
  const stop =
    body.stop === undefined || body.stop === null
      ? []
      : typeof body.stop === "string"
        ? [body.stop]
        : body.stop;
  stop.forEach((text, index) => {
    if (text.length === 0) {
      throw new AppError("invalid_value", "Stop sequences must not be empty.", {
        param: typeof body.stop === "string" ? "stop" : `stop[${index}]`,
      });
    }
  });
  // Kept with the request's usage row, where PostgreSQL's text cannot hold NUL: the settle would
  // fail for ever, the request go uncharged and its reservation stay (an audit failure).
  if (body.user != null && hasNulCharacter(body.user)) {
    throw new AppError("invalid_value", "'user' must not contain the NUL character (U+0000).", {
      param: "user",
    });
  }
  // Kept in the usage ledger (and the log), where a key's secret must never go: an API key as
  // `user` (a client passing its own credentials along) was stored whole. The message does not
  // repeat it.
  if (body.user != null && hideKeySecrets(body.user) !== body.user) {
    throw new AppError(
      "invalid_value",
      "'user' holds what looks like an API key (sk-tg-...); send an identifier of the end user instead, never a key: it is kept in the usage ledger.",
      { param: "user" },
    );
  }
  // Half an emoji (a lone surrogate): sent upstream as it is, but stored as U+FFFD in the usage
  // row, which then no longer names the user the client sent.
  if (body.user != null && !body.user.isWellFormed()) {
    throw new AppError(
      "invalid_value",
      "'user' must be well-formed Unicode: it holds half of a surrogate pair (a character cut in two).",
      { param: "user" },
    );
  }
  return {
    model: body.model,
    stream,
    includeUsage: streamOptions?.include_usage === true,
    choices: body.n ?? 1,
    user: body.user ?? undefined,
    request: {
      messages: body.messages.map(convertMessage),
      maxTokens: body.max_completion_tokens ?? body.max_tokens ?? undefined,
      temperature: body.temperature ?? undefined,
      topP: body.top_p ?? undefined,
      frequencyPenalty: body.frequency_penalty ?? 0,
      presencePenalty: body.presence_penalty ?? 0,
      stop,
      seed: body.seed ?? undefined,
      tools,
      toolChoice: convertToolChoice(body, tools),
      parallelToolCalls: body.parallel_tool_calls ?? undefined,
      reasoningEffort: body.reasoning_effort ?? undefined,
      responseFormat: convertResponseFormat(body, schemaEntries),
      user: body.user ?? undefined,
      logprobs: body.logprobs === true ? { top: body.top_logprobs ?? undefined } : undefined,
      upstreamExtras: collectUpstreamExtras(body),
    },
  };
}
