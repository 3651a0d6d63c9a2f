import { isDeepStrictEqual } from "node:util";
import type { CatalogModel } from "../catalog/catalog.ts";
import type { EngineLogger } from "../engine/create-engine.ts";
import type { ChatEngine, EngineContext, ModelStatus } from "../engine/engine.ts";
import { listChangedEngineSettings } from "./list-changed-engine-settings.ts";
import { watchEngineLoad } from "./watch-engine-load.ts";

/** A catalogue model with the engine that serves it, if any. */
export interface RegisteredModel {
  model: CatalogModel;
  /** `undefined` for models nothing serves here (image and embedding models, for now). */
  engine: ChatEngine | undefined;
}

/** Creates the engine for one catalogue model; `undefined` when it has none. */
export type CreateEngine = (model: CatalogModel, context: EngineContext) => ChatEngine | undefined;

/** What a registry does besides serving the catalogue. */
export interface ModelRegistryOptions {
  /**
   * Takes an engine that a replacement took over from once that had loaded (see
   * {@link ModelRegistry.replace}), to be closed once idle (close-when-idle.ts), as the caller
   * closes those `replace` returns. Default: nothing (a caller that closes its engines itself).
   */
  onRetired?: (engine: ChatEngine) => void;
  /** Where a replacement that loaded, failed or was superseded is told. Default: nowhere. */
  logger?: EngineLogger;
}

/** An engine a reload made for a model that another engine serves until this one has loaded. */
interface Replacement {
  engine: ChatEngine;
  stopWatching: () => void;
}

/** The catalogue as the service runs it: models by id, each with its engine. */
export class ModelRegistry {
  #models = new Map<string, RegisteredModel>();
  readonly #createEngine: CreateEngine;
  readonly #onRetired: (engine: ChatEngine) => void;
  readonly #logger: EngineLogger | undefined;
  /** Looks up the current catalogue at call time, so fallbacks follow reloads. */
  readonly #context: EngineContext = {
    resolveEngine: (id) => this.#models.get(id)?.engine,
    holdEngine: (engine) => this.hold(engine),
  };
  /** Requests under way on each engine, from their start to their end (see {@link hold}). */
  readonly #holds = new Map<ChatEngine, number>();
  /** Engines a reload replaced that still run requests, by the id of the model they served. */
  readonly #retired = new Map<ChatEngine, string>();
  /**
   * The catalogue entry each engine was made from: during a replacement the model's entry is the
   * reload's (its prices apply at once) while its engine still runs the previous settings.
   */
  readonly #builtFrom = new WeakMap<ChatEngine, CatalogModel>();
  /** Engines still loading that will take over their model from the engine serving it, by model id. */
  readonly #replacements = new Map<string, Replacement>();

  constructor(
    models: readonly CatalogModel[],
    createEngine: CreateEngine,
    options: ModelRegistryOptions = {},
  ) {
    this.#createEngine = createEngine;
    this.#onRetired = options.onRetired ?? (() => {});
    this.#logger = options.logger;
    for (const model of models) this.#models.set(model.id, { model, engine: this.#create(model) });
  }

  get(id: string): RegisteredModel | undefined {
    return this.#models.get(id);
  }

  list(): RegisteredModel[] {
    return [...this.#models.values()];
  }

  /**
   * Swaps in a new catalogue: every entry (prices, kind, owner) at once; engines as follows.
   *
   * A model whose engine settings and `context_length` did not change keeps its engine (and its
   * loaded weights, or the load under way) unless that engine is `unavailable` (a reload is how
   * an operator retries a model whose file was missing or failed to load; not an upstream model
   * whose endpoints rest, which recover by themselves: ChatEngine.recoversByItself) or its source changed
   * (a local model's file replaced at the same path, with `mv`: the reload is how the new weights
   * are served). Others get a new engine: an engine fixes its context length when it is created
   * (a local model sizes its context from it, so a new length means loading the model again).
   *
   * A new engine that still loads (a local model) does not take over from one that is
   * `available`: the old engine serves the model until the new one has loaded, then retires
   * ({@link ModelRegistryOptions.onRetired}; requests still waiting for its sequences move,
   * follow-reloads.ts). One that fails to load (a typo in the path, a bad file, too little
   * memory for both) is closed and the old engine goes on serving, so that one mistake in a
   * reload never takes a working model down; the next reload tries again. Meanwhile the model
   * reports the serving engine's status and context length. A later reload that changes the
   * settings again, or back, or removes the model, closes the replacement still loading; one that
   * leaves them as the replacement has them lets it go on loading. A model whose engine is
   * `loading` or `unavailable` has nothing to keep: its new engine serves at once, as does one
   * that is ready at once (an upstream).
   *
   * Returns the engines no longer used now, for the caller to close once their requests have
   * finished: requests in flight keep the engine they started on.
   */
  replace(models: readonly CatalogModel[]): ChatEngine[] {
    const previous = this.#models;
    const next = new Map<string, RegisteredModel>();
    const kept = new Set<ChatEngine>();
    for (const model of models) {
      const old = previous.get(model.id)?.engine;
      const replacement = this.#replacements.get(model.id);
      let engine: ChatEngine | undefined;
      if (old !== undefined && this.#fits(old, model)) {
        // Unchanged, or changed back while a replacement loaded.
        if (replacement !== undefined) this.#dropReplacement(model.id, "the reload set the model back");
        engine = old;
      } else if (replacement !== undefined && this.#fits(replacement.engine, model)) {
        // The replacement already has these settings: it goes on loading.
        if (old?.status() === "available") engine = old;
        else {
          this.#replacements.delete(model.id);
          replacement.stopWatching();
          engine = replacement.engine;
        }
      } else {
        if (replacement !== undefined) this.#dropReplacement(model.id, "the reload changed the model again");
        engine = this.#create(model);
        if (old !== undefined && old.status() === "available" && engine?.status() === "loading") {
          this.#startReplacement(model.id, engine);
          engine = old;
        }
      }
      next.set(model.id, { model, engine });
      if (engine !== undefined) kept.add(engine);
    }
    for (const id of [...this.#replacements.keys()])
      if (!next.has(id)) this.#dropReplacement(id, "the reload removed the model");
    this.#models = next;
    const retired = [...previous.values()].flatMap((entry) =>
      entry.engine === undefined || kept.has(entry.engine)
        ? []
        : [{ engine: entry.engine, id: entry.model.id }],
    );
    for (const { engine, id } of retired) this.#retired.set(engine, id);
    return retired.map(({ engine }) => engine);
  }

  /** The ids of models whose new engine still loads while their previous one serves them. */
  listReplacements(): string[] {
    return [...this.#replacements.keys()];
  }

  /** The engine loading to take over `id` from the one serving it, if any (see {@link replace}). */
  getReplacement(id: string): ChatEngine | undefined {
    return this.#replacements.get(id)?.engine;
  }

  #create(model: CatalogModel): ChatEngine | undefined {
    const engine = this.#createEngine(model, this.#context);
    if (engine !== undefined) this.#builtFrom.set(engine, model);
    return engine;
  }

  /** Whether `engine` can serve `model` as configured now, so that a reload keeps it. */
  #fits(engine: ChatEngine, model: CatalogModel): boolean {
    const built = this.#builtFrom.get(engine);
    return (
      built !== undefined &&
      (engine.recoversByItself === true || engine.status() !== "unavailable") &&
      built.contextLength === model.contextLength &&
      isDeepStrictEqual(built.engine, model.engine) &&
      engine.sourceChanged?.() !== true
    );
  }

  #startReplacement(id: string, engine: ChatEngine): void {
    const replacement: Replacement = { engine, stopWatching: () => {} };
    this.#replacements.set(id, replacement);
    replacement.stopWatching = watchEngineLoad(engine, (status) => this.#settle(id, replacement, status));
  }

  /** A replacement still loading that a reload made pointless: closed, as nothing runs on it. */
  #dropReplacement(id: string, why: string): void {
    const replacement = this.#replacements.get(id);
    if (replacement === undefined) return;
    this.#replacements.delete(id);
    replacement.stopWatching();
    this.#closeUnused(replacement.engine);
    this.#logger?.info({ model: id }, `closing the engine still loading to replace the model's: ${why}`);
  }

  /** A replacement has loaded (it takes over) or failed (the engine serving the model stays). */
  #settle(id: string, replacement: Replacement, status: "available" | "unavailable"): void {
    if (this.#replacements.get(id) !== replacement) return;
    this.#replacements.delete(id);
    const entry = this.#models.get(id);
    const serving = entry?.engine;
    const before = serving === undefined ? undefined : this.#builtFrom.get(serving);
    const after = this.#builtFrom.get(replacement.engine);
    const changed =
      before === undefined || after === undefined ? [] : listChangedEngineSettings(before, after);
    const what = changed.length === 0 ? "its file replaced at the same path" : changed.join(", ");
    if (entry === undefined) {
      this.#closeUnused(replacement.engine);
      return;
    }
    if (status === "available") {
      this.#models.set(id, { model: entry.model, engine: replacement.engine });
      if (serving !== undefined) {
        this.#retired.set(serving, id);
        this.#onRetired(serving);
      }
      this.#logger?.info(
        { model: id, changed },
        `the engine a reload made for model '${id}' (${what}) has loaded and serves it now; the previous one closes once its requests have ended`,
      );
      return;
    }
    this.#closeUnused(replacement.engine);
    this.#logger?.error(
      { model: id, changed },
      `the engine a reload made for model '${id}' (${what}) failed to load (the model's warning or error above says why); the previous engine keeps serving the model. Correct ${changed.length === 1 ? "the setting" : "the settings"} and reload to try again`,
    );
  }

  #closeUnused(engine: ChatEngine): void {
    engine.close().catch((error: unknown) => {
      this.#logger?.error({ err: error }, "closing an engine that was loading to replace another failed");
    });
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
    const replacements = [...this.#replacements.values()];
    this.#replacements.clear();
    for (const replacement of replacements) replacement.stopWatching();
    await Promise.all([
      ...this.list().map((entry) => entry.engine?.close()),
      ...replacements.map((replacement) => replacement.engine.close()),
    ]);
  }
}

/** A model's readiness: its engine's, or `unavailable` where nothing serves it. */
export function getModelStatus(entry: RegisteredModel): ModelStatus {
  return entry.engine?.status() ?? "unavailable";
}

/**
 * The context length reported: the engine's (a local model's catalogue value capped at its file's
 * trained context; an upstream model's catalogue value or the one its server gave), else the
 * catalogue's where nothing serves the model. `undefined` while the engine does not know it: a
 * local model still loading or downloading reported the uncapped catalogue value until it had
 * loaded.
 */
export function getContextLength(entry: RegisteredModel): number | undefined {
  return entry.engine === undefined ? entry.model.contextLength : entry.engine.contextLength;
}
