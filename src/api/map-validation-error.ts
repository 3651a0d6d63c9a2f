import { AppError } from "../errors/app-error.ts";

/** One error as Ajv (Fastify's validator) reports it. */
export interface SchemaValidationIssue {
  keyword: string;
  instancePath: string;
  schemaPath: string;
  params: Record<string, unknown>;
  message?: string;
}

/** The names in a JSON pointer (`/messages/0/role` → `messages`, `0`, `role`), unescaped. */
function readPointerNames(instancePath: string): string[] {
  if (instancePath === "") return [];
  return instancePath
    .slice(1)
    .split("/")
    .map((segment) => segment.replaceAll("~1", "/").replaceAll("~0", "~"));
}

/** `/messages/0/role` → `messages[0].role`; the empty path (the body itself) → undefined. */
export function convertInstancePathToParam(instancePath: string): string | undefined {
  if (instancePath === "") return undefined;
  let param = "";
  for (const name of readPointerNames(instancePath)) {
    param += /^\d+$/.test(name) ? `[${name}]` : param === "" ? name : `.${name}`;
  }
  return param;
}

/** The value at a JSON pointer (`/messages/0/content`) in `body`, or `undefined`. */
export function readValueAt(body: unknown, instancePath: string): unknown {
  let value = body;
  for (const name of readPointerNames(instancePath)) {
    if (typeof value !== "object" || value === null) return undefined;
    value = Object.hasOwn(value, name) ? (value as Record<string, unknown>)[name] : undefined;
  }
  return value;
}

function joinParam(base: string | undefined, child: string): string {
  return base === undefined ? child : `${base}.${child}`;
}

function describeType(type: unknown): string {
  const types = (Array.isArray(type) ? type : [type]).map(String);
  const named = types.map((name) =>
    name === "integer"
      ? "an integer"
      : name === "array"
        ? "an array"
        : name === "object"
          ? "an object"
          : name === "null"
            ? "null"
            : `a ${name}`,
  );
  return listAlternatives(named);
}

/** `["a string", "an array", "null"]` -> "a string, an array or null". */
function listAlternatives(alternatives: readonly string[]): string {
  return alternatives.length <= 1
    ? (alternatives[0] ?? "")
    : `${alternatives.slice(0, -1).join(", ")} or ${alternatives.at(-1)}`;
}

function depth(issue: SchemaValidationIssue): number {
  return issue.instancePath.split("/").length;
}

/**
 * Whether the field at `instancePath` refuses null although its schema takes it: a message's
 * `content` may be null on an assistant message only (convert-chat-request.ts refuses it on the
 * others), so a wrong type there does not offer null.
 */
function refusesNull(instancePath: string, body: unknown): boolean {
  if (!/^\/messages\/\d+\/content$/.test(instancePath)) return false;
  const role = readValueAt(body, instancePath.replace(/content$/, "role"));
  return typeof role === "string" && role !== "assistant";
}

/**
 * Turns the errors of one failed validation into the one {@link AppError} the client sees:
 * a missing field is `missing_required_parameter`, a wrong JSON type `invalid_type`, too many
 * entries `array_above_max_length`, anything else out of range `invalid_value`; `param` names
 * the field with its path. Where a value matched none of a union's branches, the error of the
 * branch that got furthest into the value explains it best; where every branch failed on the
 * value's type itself, the message lists the accepted types. `body`, the request's parsed body,
 * says where the schema takes more than the request's other fields allow.
 */
export function mapValidationError(reported: readonly SchemaValidationIssue[], body?: unknown): AppError {
  // Ajv checks `enum` and `const` even when the subschema's `type` already failed; the value
  // was then of the wrong type, which the `type` error says better.
  const failedTypePaths = new Set(
    reported
      .filter((issue) => issue.keyword === "type")
      .map((issue) => issue.schemaPath.replace(/\/type$/, "")),
  );
  const issues = reported.filter(
    (issue) => issue.keyword === "type" || !failedTypePaths.has(issue.schemaPath.replace(/\/[^/]+$/, "")),
  );
  const union = issues.find((issue) => issue.keyword === "anyOf");
  if (union !== undefined) {
    const inner = issues.filter(
      (issue) => issue.keyword !== "anyOf" && issue.instancePath.startsWith(union.instancePath),
    );
    const deepest = Math.max(...inner.map(depth));
    const atDeepest = inner.filter((issue) => depth(issue) === deepest);
    const allTypeErrors = inner.every(
      (issue) =>
        issue.instancePath === union.instancePath && (issue.keyword === "type" || issue.keyword === "const"),
    );
    if (inner.length === 0 || allTypeErrors) {
      const param = convertInstancePathToParam(union.instancePath);
      const accepted = [
        ...new Set(
          inner
            .filter((issue) => !(issue.params.type === "null" && refusesNull(union.instancePath, body)))
            .map((issue) =>
              issue.keyword === "const"
                ? JSON.stringify(issue.params.allowedValue)
                : describeType(issue.params.type),
            ),
        ),
      ];
      const onlyConstants = inner.length > 0 && inner.every((issue) => issue.keyword === "const");
      // A type refused is named as one, as mapSingleIssue names it ("Invalid type for").
      return new AppError(
        onlyConstants ? "invalid_value" : "invalid_type",
        `Invalid ${onlyConstants ? "value" : "type"} for '${param ?? "body"}': expected ${listAlternatives(accepted) || "another value"}.`,
        { param },
      );
    }
    const preferred =
      atDeepest.find((issue) => issue.keyword !== "type" && issue.keyword !== "const") ?? atDeepest[0];
    if (preferred !== undefined) return mapSingleIssue(preferred);
  }
  const first = issues[0];
  if (first === undefined) return new AppError("invalid_value", "The request body is invalid.");
  return mapSingleIssue(first);
}

function mapSingleIssue(issue: SchemaValidationIssue): AppError {
  const param = convertInstancePathToParam(issue.instancePath);
  const where = param ?? "body";
  switch (issue.keyword) {
    case "required": {
      const missing = joinParam(param, String(issue.params.missingProperty));
      return new AppError("missing_required_parameter", `Missing required parameter: '${missing}'.`, {
        param: missing,
      });
    }
    case "type":
      if (param === undefined) {
        return new AppError("invalid_type", "The request body must be a JSON object.", { param });
      }
      return new AppError(
        "invalid_type",
        `Invalid type for '${where}': expected ${describeType(issue.params.type)}.`,
        {
          param,
        },
      );
    case "maxItems":
      return new AppError(
        "array_above_max_length",
        `Invalid '${where}': array too long. Expected an array with at most ${String(issue.params.limit)} items.`,
        { param },
      );
    case "minItems":
      return new AppError(
        "invalid_value",
        issue.params.limit === 1
          ? `Invalid '${where}': expected a non-empty array.`
          : `Invalid '${where}': expected an array with at least ${String(issue.params.limit)} items.`,
        { param },
      );
    case "maxLength":
      return new AppError(
        "invalid_value",
        `Invalid value for '${where}': at most ${String(issue.params.limit)} characters; send a shorter one.`,
        { param },
      );
    case "minLength":
      return new AppError(
        "invalid_value",
        issue.params.limit === 1
          ? `Invalid value for '${where}': it must not be empty.`
          : `Invalid value for '${where}': at least ${String(issue.params.limit)} characters.`,
        { param },
      );
    case "minimum":
    case "maximum":
    case "exclusiveMinimum":
    case "exclusiveMaximum":
      return new AppError(
        "invalid_value",
        `Invalid value for '${where}': must be ${String(issue.params.comparison)} ${String(issue.params.limit)}.`,
        { param },
      );
    case "const":
      return new AppError(
        "invalid_value",
        `Invalid value for '${where}': expected ${JSON.stringify(issue.params.allowedValue)}.`,
        { param },
      );
    case "enum":
      return new AppError(
        "invalid_value",
        `Invalid value for '${where}': expected one of ${(issue.params.allowedValues as unknown[]).map((value) => JSON.stringify(value)).join(", ")}.`,
        { param },
      );
    default:
      return new AppError(
        "invalid_value",
        `Invalid value for '${where}': ${issue.message ?? "not allowed"}.`,
        { param },
      );
  }
}
