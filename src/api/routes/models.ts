import type { FastifyInstance } from "fastify";
import type { RequestKey } from "../../chat/request-key.ts";
import { isModelAllowedForKey } from "../../chat/request-key.ts";
import { AppError } from "../../errors/app-error.ts";
import { shownValue } from "../../errors/shown-value.ts";
import {
  getContextLength,
  getModelStatus,
  type ModelRegistry,
  type RegisteredModel,
} from "../../models/model-registry.ts";

/** One model as `/v1/models` shows it: the contract's fields plus kind, pricing, context and status. */
export function renderModel(entry: RegisteredModel) {
  const { model } = entry;
  const pricing =
    model.pricing.kind === "chat"
      ? {
          input_per_million: model.pricing.inputPerMillion,
          output_per_million: model.pricing.outputPerMillion,
        }
      : { per_million: model.pricing.perMillion };
  return {
    id: model.id,
    object: "model" as const,
    created: model.created,
    owned_by: model.ownedBy,
    kind: model.kind,
    pricing,
    ...(model.kind === "chat" ? { context_length: getContextLength(entry) ?? null } : {}),
    status: getModelStatus(entry),
  };
}

/** `GET /v1/models` and `GET /v1/models/{id}` (ids may hold "/" and ":"). */
export function registerModelRoutes(
  app: FastifyInstance,
  options: { registry: ModelRegistry; getKey: (request: object) => RequestKey },
): void {
  const { registry, getKey } = options;
  app.get("/v1/models", async (request) => {
    const key = getKey(request);
    return {
      object: "list" as const,
      data: registry
        .list()
        .filter((entry) => isModelAllowedForKey(key, entry.model.id))
        .map(renderModel),
    };
  });
  app.get<{ Params: { "*": string } }>("/v1/models/*", async (request) => {
    const key = getKey(request);
    const id = request.params["*"];
    const entry = registry.get(id);
    // A model the key may not use is answered as if it did not exist (SPEC §11).
    if (entry === undefined || !isModelAllowedForKey(key, id)) {
      throw new AppError(
        "model_not_found",
        `The model '${shownValue(id)}' does not exist. List the models with GET /v1/models.`,
        {
          param: "model",
        },
      );
    }
    return renderModel(entry);
  });
}
