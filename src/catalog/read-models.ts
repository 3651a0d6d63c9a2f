/**
 * Validates the `models` list: each entry's id, kind, owner, pricing, context length, created
 * time and engine, then what needs the whole catalogue (unique ids, fallbacks that name chat
 * models of this catalogue).
 */
import { parseAmount } from "../billing/money.ts";
import type { CatalogModel, EngineConfig, ModelKind, Pricing } from "./catalog.ts";
import { DEFAULT_OWNED_BY } from "./config-defaults.ts";
import type { ConfigPath } from "./config-error.ts";
import {
  type ConfigIssues,
  type ConfigMapping,
  checkKnownKeys,
  describeValue,
  isAbsent,
  isMapping,
  readChoice,
  readInteger,
  readList,
  readMapping,
  readString,
} from "./config-fields.ts";
import { hasControlCharacters } from "./has-control-characters.ts";
import { readEngineConfig } from "./read-engine-config.ts";
import { createNameSuggester } from "./suggest-name.ts";

const MODEL_KEYS = ["id", "kind", "owned_by", "pricing", "context_length", "created", "engine"] as const;
const MODEL_KINDS = ["chat", "image", "embedding"] as const satisfies readonly ModelKind[];
const CHAT_PRICING_KEYS = ["input_per_million", "output_per_million"] as const;
const FLAT_PRICING_KEYS = ["per_million"] as const;
const CHAT_PRICING_EXAMPLE = '{ input_per_million: "0.10", output_per_million: "0.40" }';
const FLAT_PRICING_EXAMPLE = '{ per_million: "0.02" }';

export interface ReadModelsOptions {
  issues: ConfigIssues;
  value: unknown;
  /** Relative llama model paths are resolved against this folder. */
  configFolder: string;
  /** `created` for models that do not set it (Unix seconds). */
  created: number;
}

/** The validated models; `undefined` when the file has no `models` key (the caller picks the default). */
export function readModels(options: ReadModelsOptions): CatalogModel[] | undefined {
  const { issues } = options;
  const path: ConfigPath = ["models"];
  const list = readList(
    issues,
    path,
    options.value,
    "[ { id: my-model, kind: chat, pricing: ..., engine: ... } ]",
  );
  if (list === undefined) return undefined;
  const models: CatalogModel[] = [];
  const firstIndexOfId = new Map<string, number>();
  list.forEach((item, index) => {
    const model = readModel(options, [...path, index], item);
    const id = isMapping(item) ? item.id : undefined;
    if (typeof id === "string" && id !== "") {
      const first = firstIndexOfId.get(id);
      if (first === undefined) firstIndexOfId.set(id, index);
      else
        issues.add(
          [...path, index, "id"],
          `${JSON.stringify(id)} is already the id of models[${first}]; ids must be unique`,
        );
    }
    if (model !== undefined) models.push(model);
  });
  checkFallbacks(options, list, firstIndexOfId);
  return models;
}

function readModel(options: ReadModelsOptions, path: ConfigPath, value: unknown): CatalogModel | undefined {
  const { issues } = options;
  const before = issues.count;
  const model = readMapping(issues, path, value, "{ id: my-model, kind: chat, pricing: ..., engine: ... }");
  if (model === undefined) {
    if (isAbsent(value))
      issues.add(
        path,
        "is empty; write a model such as { id: my-model, kind: chat, pricing: ..., engine: ... }",
      );
    return undefined;
  }
  checkKnownKeys(issues, path, model, MODEL_KEYS, {
    type: 'models have a kind (chat, image or embedding); the engine has the type: write "kind:" here, or move type into engine',
    name: "write the model's name as id",
  });
  const id = readId(issues, [...path, "id"], model.id);
  const kind: ModelKind | undefined = isAbsent(model.kind)
    ? "chat"
    : readChoice(issues, [...path, "kind"], model.kind, MODEL_KINDS);
  const ownedBy =
    readString(issues, [...path, "owned_by"], model.owned_by, { example: '"tollgate"' }) ?? DEFAULT_OWNED_BY;
  const pricing =
    kind === undefined ? undefined : readPricing(issues, [...path, "pricing"], model.pricing, kind);
  const contextLength = readInteger(issues, [...path, "context_length"], model.context_length, {
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
  });
  const created =
    readInteger(issues, [...path, "created"], model.created, { min: 0, max: Number.MAX_SAFE_INTEGER }) ??
    options.created;
  const engine = kind === undefined ? undefined : readModelEngine(options, path, model, kind, id);
  if (issues.count > before || id === undefined || kind === undefined || pricing === undefined)
    return undefined;
  return { id, kind, ownedBy, pricing, contextLength, created, engine };
}

function readId(issues: ConfigIssues, path: ConfigPath, value: unknown): string | undefined {
  if (isAbsent(value)) {
    issues.add(path, 'missing; give each model a unique id, such as "qwen2.5-0.5b-instruct"');
    return undefined;
  }
  if (typeof value === "number") {
    // Only a whole number reads back as written: YAML gave 3.10 as the number 3.1.
    issues.add(
      path,
      Number.isSafeInteger(value)
        ? `must be a string; quote it: "${String(value)}"`
        : "must be a string; put the id in quotes as you wrote it",
    );
    return undefined;
  }
  const id = readString(issues, path, value, { example: '"qwen2.5-0.5b-instruct"' });
  // Keys list their models trimmed (`--models "a, b"`): " lead" would be a model no key could
  // be limited to, and a key given it would be given "lead", another model, instead.
  if (id !== undefined && id.trim() !== id) {
    issues.add(path, `must not begin or end with whitespace; write ${JSON.stringify(id.trim())}`);
    return undefined;
  }
  // Ids are printed in tables (`models list`, `usage`) and logs, as key names are: a tab or line
  // break broke `models list`'s table, an escape sequence reached the terminal raw.
  if (id !== undefined && hasControlCharacters(id)) {
    issues.add(
      path,
      "must not hold control characters (line breaks, tabs, escapes, text-direction marks): model ids are printed in tables and logs; remove them",
    );
    return undefined;
  }
  if (id !== undefined && !isAddressable(id)) {
    issues.add(
      path,
      `must not begin or end with "/" nor have an empty, "." or ".." part between slashes: GET /v1/models/{id} could not name it (the server joins repeated slashes, clients resolve dot parts)${addressable(id) === "" ? "" : `; write ${JSON.stringify(addressable(id))}`}`,
    );
    return undefined;
  }
  return id;
}

/** Whether `GET /v1/models/{id}`, written out as it is, reaches the id (ids may hold "/"). */
function isAddressable(id: string): boolean {
  return id.split("/").every((part) => part !== "" && part !== "." && part !== "..");
}

/** The id with its empty, "." and ".." parts left out: a suggestion for one that is not addressable. */
function addressable(id: string): string {
  return id
    .split("/")
    .filter((part) => part !== "" && part !== "." && part !== "..")
    .join("/");
}

function readPricing(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  kind: ModelKind,
): Pricing | undefined {
  const example = kind === "chat" ? CHAT_PRICING_EXAMPLE : FLAT_PRICING_EXAMPLE;
  if (isAbsent(value)) {
    issues.add(path, `missing; write the prices per million tokens, such as ${example}`);
    return undefined;
  }
  const pricing = readMapping(issues, path, value, example);
  if (pricing === undefined) return undefined;
  if (kind === "chat") {
    checkKnownKeys(issues, path, pricing, CHAT_PRICING_KEYS, {
      per_million: "chat models have two prices; write input_per_million and output_per_million instead",
    });
    const inputPerMillion = readPrice(
      issues,
      [...path, "input_per_million"],
      pricing.input_per_million,
      '"0.10"',
    );
    const outputPerMillion = readPrice(
      issues,
      [...path, "output_per_million"],
      pricing.output_per_million,
      '"0.40"',
    );
    if (inputPerMillion === undefined || outputPerMillion === undefined) return undefined;
    return { kind: "chat", inputPerMillion, outputPerMillion };
  }
  const flatHint = `${kind} models have one price; write per_million instead`;
  checkKnownKeys(issues, path, pricing, FLAT_PRICING_KEYS, {
    input_per_million: flatHint,
    output_per_million: flatHint,
  });
  const perMillion = readPrice(issues, [...path, "per_million"], pricing.per_million, '"0.02"');
  return perMillion === undefined ? undefined : { kind: "flat", perMillion };
}

/** A price as the decimal string written (checked by `parseAmount`), never a YAML number. */
function readPrice(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  example: string,
): string | undefined {
  if (isAbsent(value)) {
    issues.add(path, `missing; write a price per million tokens as a quoted decimal, such as ${example}`);
    return undefined;
  }
  if (typeof value !== "string") {
    const got =
      typeof value === "number"
        ? `the number ${String(value)}; YAML numbers are floating point and lose precision`
        : describeValue(value);
    issues.add(path, `write the price as a quoted decimal string, such as ${example} (got ${got})`);
    return undefined;
  }
  try {
    parseAmount(value, { noun: "price" });
    // As /v1/models shows it: without leading zeros ("007.50" is 7.50), its decimals as written.
    return value.replace(/^0+(?=\d)/, "");
  } catch (error) {
    issues.add(path, error instanceof Error ? error.message : String(error));
    return undefined;
  }
}

function readModelEngine(
  options: ReadModelsOptions,
  path: ConfigPath,
  model: ConfigMapping,
  kind: ModelKind,
  id: string | undefined,
): EngineConfig | undefined {
  const enginePath = [...path, "engine"];
  if (kind !== "chat") {
    if (!isAbsent(model.engine)) {
      options.issues.add(enginePath, `${kind} models are not served by an engine yet; remove engine`);
    }
    return undefined;
  }
  if (isAbsent(model.engine)) {
    options.issues.add(
      enginePath,
      'missing; chat models need an engine, such as { type: llama, model: "hf:ORG/REPO:Q4_K_M" } or { type: openai, endpoints: [ { base_url: "https://..." } ], model: NAME }',
    );
    return undefined;
  }
  return readEngineConfig({
    issues: options.issues,
    path: enginePath,
    value: model.engine,
    configFolder: options.configFolder,
    modelId: id,
  });
}

/** Every fallback must name another chat model of this catalogue. */
function checkFallbacks(
  options: ReadModelsOptions,
  list: unknown[],
  firstIndexOfId: Map<string, number>,
): void {
  const ids = [...firstIndexOfId.keys()];
  // Made once, and short: joined into every problem, the whole list of a 3000-model catalogue
  // with a typo in each fallback made a 1.7 MB log line and held the event loop for seconds.
  const named = nameSome(ids);
  const suggest = createNameSuggester(ids);
  list.forEach((item, index) => {
    if (!isMapping(item) || !isMapping(item.engine) || item.engine.type !== "openai") return;
    if (!Array.isArray(item.engine.fallbacks)) return;
    item.engine.fallbacks.forEach((fallback: unknown, fallbackIndex) => {
      if (typeof fallback !== "string" || fallback === "") return;
      const path = ["models", index, "engine", "fallbacks", fallbackIndex];
      const target = firstIndexOfId.get(fallback);
      if (target === undefined) {
        const suggestion = suggest(fallback);
        const fix = suggestion === undefined ? `name one of: ${named}` : `did you mean "${suggestion}"?`;
        options.issues.add(path, `${JSON.stringify(fallback)} is not a model in this catalogue; ${fix}`);
        return;
      }
      if (item.id === fallback) {
        options.issues.add(path, "a model cannot fall back to itself; name another model");
        return;
      }
      const targetItem = list[target];
      const targetKind = isMapping(targetItem) ? targetItem.kind : undefined;
      if (!isAbsent(targetKind) && targetKind !== "chat") {
        options.issues.add(
          path,
          `${JSON.stringify(fallback)} is an ${String(targetKind)} model; fallbacks must be chat models`,
        );
      }
    });
  });
}

/** How many ids a problem names at most: the rest are counted. */
const NAMED_IDS = 10;

/** `a, b, c` or, past {@link NAMED_IDS}, the first ones and `and N more`. */
function nameSome(ids: readonly string[]): string {
  if (ids.length <= NAMED_IDS) return ids.join(", ");
  return `${ids.slice(0, NAMED_IDS).join(", ")} and ${ids.length - NAMED_IDS} more`;
}
