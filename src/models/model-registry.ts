import { isDeepStrictEqual } from "node:util";
import type { CatalogModel } from "../catalog/catalog.ts";
import type { ChatEngine, EngineContext, ModelStatus } from "../engine/engine.ts";

/** A catalogue model with the engine that serves it, if any. */
export interface RegisteredModel {
  model: CatalogModel;
  /** `undefined` for models nothing serves here (image and embedding models, for now). */
  engine: ChatEngine | undefined;
}

/** Creates the engine for one catalogue model; `undefined` when it has none. */
export type CreateEngine = (model: CatalogModel, context: EngineContext) => ChatEngine | undefined;

/** The catalogue as the service runs it: models by id, each with its engine. */
export class ModelRegistry {
  #models = new Map<string, RegisteredModel>();
  readonly #createEngine: CreateEngine;
  /** Looks up the current catalogue at call time, so fallbacks follow reloads. */
  readonly #context: EngineContext = { resolveEngine: (id) => this.#models.get(id)?.engine };
  /** Requests under way on each engine, from their start to their end (see {@link hold}). */
  readonly #holds = new Map<ChatEngine, number>();
  /** Engines a reload replaced that still run requests, by the id of the model they served. */
  readonly #retired = new Map<ChatEngine, string>();

  constructor(models: readonly CatalogModel[], createEngine: CreateEngine) {
    this.#createEngine = createEngine;
    for (const model of models)
      this.#models.set(model.id, { model, engine: createEngine(model, this.#context) });
  }

  get(id: string): RegisteredModel | undefined {
    return this.#models.get(id);
  }

  list(): RegisteredModel[] {
    return [...this.#models.values()];
  }

  /**
   * Swaps in a new catalogue. A model whose engine settings and `context_length` did not change
   * keeps its engine (and its loaded weights, or the load under way) unless that engine is
   * `unavailable` (a reload is how an operator retries a model whose file was missing or failed
   * to load) or its source changed (a local model's file replaced at the same path, with `mv`:
   * the reload is how the new weights are served). Others get a new engine: an engine fixes its
   * context length when it is created (a local model sizes its context from it, so a new length
   * means loading the model again).
   * Returns the engines no longer used, for the caller to close once their requests have
   * finished: requests in flight keep the engine they started on.
   */
  replace(models: readonly CatalogModel[]): ChatEngine[] {
    const previous = this.#models;
    const next = new Map<string, RegisteredModel>();
    const kept = new Set<ChatEngine>();
    for (const model of models) {
      const old = previous.get(model.id);
      if (
        old?.engine !== undefined &&
        old.engine.status() !== "unavailable" &&
        old.model.contextLength === model.contextLength &&
        isDeepStrictEqual(old.model.engine, model.engine) &&
        old.engine.sourceChanged?.() !== true
      ) {
        next.set(model.id, { model, engine: old.engine });
        kept.add(old.engine);
      } else {
        next.set(model.id, { model, engine: this.#createEngine(model, this.#context) });
      }
    }
    this.#models = next;
    const retired = [...previous.values()].flatMap((entry) =>
      entry.engine === undefined || kept.has(entry.engine)
        ? []
        : [{ engine: entry.engine, id: entry.model.id }],
    );
    for (const { engine, id } of retired) this.#retired.set(engine, id);
    return retired.map(({ engine }) => engine);
  }

  /** A replaced engine has closed: its requests no longer count in {@link loadOf}. */
  forgetRetired(engine: ChatEngine): void {
    this.#retired.delete(engine);
  }

  /**
   * The ids of models a reload removed whose engines still finish requests: {@link loadOf} counts
   * those requests under the id until the engines close.
   */
  listRemovedIds(): string[] {
    const ids = new Set<string>();
    for (const id of this.#retired.values()) if (!this.#models.has(id)) ids.add(id);
    return [...ids];
  }

  /**
   * The requests running and waiting for a model: its engine's, and those of engines a reload
   * replaced that still finish theirs (a reload that raised a limit to clear a backlog must show
   * the backlog that the old engine still works through). `undefined` where no engine says.
   */
  loadOf(id: string): { running: number; waiting: number } | undefined {
    let total = this.#models.get(id)?.engine?.load?.();
    for (const [engine, retiredId] of this.#retired) {
      if (retiredId !== id) continue;
      const load = engine.load?.();
      if (load === undefined) continue;
      total = {
        running: (total?.running ?? 0) + load.running,
        waiting: (total?.waiting ?? 0) + load.waiting,
      };
    }
    return total;
  }

  /**
   * Marks a request under way on `engine` until the returned function is called (once; later
   * calls do nothing). A reload closes an engine it replaced only once nothing holds it
   * (close-when-idle.ts): a request keeps the engine it started on through every step, its
   * waits for limits and reservations included.
   */
  hold(engine: ChatEngine): () => void {
    this.#holds.set(engine, (this.#holds.get(engine) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const remaining = (this.#holds.get(engine) ?? 1) - 1;
      if (remaining === 0) this.#holds.delete(engine);
      else this.#holds.set(engine, remaining);
    };
  }

  /** Whether a request started on `engine` has not ended yet (see {@link hold}). */
  isHeld(engine: ChatEngine): boolean {
    return this.#holds.has(engine);
  }

  /** Closes every engine (in-flight requests are aborted). */
  async close(): Promise<void> {
    await Promise.all(this.list().map((entry) => entry.engine?.close()));
  }
}

/** A model's readiness: its engine's, or `unavailable` where nothing serves it. */
export function getModelStatus(entry: RegisteredModel): ModelStatus {
  return entry.engine?.status() ?? "unavailable";
}

/** The context length reported and enforced: the engine's (capped at the file's), else the catalogue's. */
export function getContextLength(entry: RegisteredModel): number | undefined {
  return entry.engine?.contextLength ?? entry.model.contextLength;
}
