import type { FastifyReply, FastifyRequest } from "fastify";
import { parseAmount } from "../billing/money.ts";
import { CLIENT_CLOSED } from "../chat/chat-service.ts";
import type { Metrics } from "../metrics/metrics.ts";
import type { ModelRegistry } from "../models/model-registry.ts";
import { stateOf } from "./request-state.ts";

/** The status logged and counted for a request whose client left before its response was complete (nginx's). */
export const CLIENT_CLOSED_STATUS = 499;

/**
 * Records a request once: one log line and one metrics observation per request (who, what,
 * outcome, tokens, cost and time; never the prompt). A request whose client left before its
 * response was complete (`clientClosed`) is recorded as 499 once its work is over (it may still
 * have been charged).
 */
export function createRequestRecorder(registry: ModelRegistry, metrics: Metrics) {
  return (request: FastifyRequest, reply: FastifyReply, clientClosed: boolean): void => {
    const state = stateOf(request);
    if (state.recorded) return;
    state.recorded = true;
    const fields = state.fields ?? {};
    const route = request.routeOptions.url ?? "unknown";
    const status = clientClosed ? CLIENT_CLOSED_STATUS : reply.statusCode;
    // As the request's usage row says (its error code), unless an error came first.
    if (clientClosed && fields.error === undefined) fields.error = CLIENT_CLOSED;
    request.log.info(
      {
        method: request.method,
        route,
        status,
        key: state.key?.publicId,
        ms: Math.round(reply.elapsedTime * 10) / 10,
        ...fields,
      },
      "request",
    );
    // Only catalogue ids become label values (never whatever a client asked for): one in the
    // catalogue now, or one that ran (it was measured), though a reload may have removed it since.
    const named = state.modelId ?? (typeof fields.model === "string" ? fields.model : undefined);
    const model =
      named !== undefined && (registry.get(named) !== undefined || fields.promptTokens !== undefined)
        ? named
        : "";
    const number = (value: unknown) => (typeof value === "number" ? value : undefined);
    metrics.observe({
      route,
      model,
      servedModel: typeof fields.servedBy === "string" ? fields.servedBy : undefined,
      status,
      seconds: reply.elapsedTime / 1000,
      promptTokens: number(fields.promptTokens),
      completionTokens: number(fields.completionTokens),
      costNano: typeof fields.cost === "string" ? parseAmount(fields.cost) : undefined,
      firstTokenSeconds: fields.firstTokenMs === undefined ? undefined : Number(fields.firstTokenMs) / 1000,
      engineSeconds: fields.engineMs === undefined ? undefined : Number(fields.engineMs) / 1000,
    });
  };
}
