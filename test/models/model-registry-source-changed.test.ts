import { describe, expect, it } from "vitest";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import type { ChatEngine, ModelStatus } from "../../src/engine/engine.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";

/** An engine whose source (a local model's file) has changed when `changed()` says so. */
function createFakeEngine(options: { status: ModelStatus; changed?: () => boolean }): ChatEngine {
  const { changed } = options;
  return {
    contextLength: undefined,
    supportsMultipleChoices: false,
    status: () => options.status,
    prepare: () => Promise.reject(new Error("not used")),
    close: async () => {},
    ...(changed === undefined ? {} : { sourceChanged: changed }),
  };
}

function createModel(id: string): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "tollgate",
    pricing: { kind: "chat", inputPerMillion: "1", outputPerMillion: "2" },
    contextLength: undefined,
    created: 0,
    engine: { type: "llama", model: `/models/${id}.gguf`, parallel: 1, maxQueue: 4, threads: 1, gpu: false },
  };
}

describe("replacing the catalogue when a model's source changed", () => {
  it("gives an unchanged model a new engine once its engine's source changed, loaded or loading", () => {
    const replaced = new Set<string>();
    const statuses: Record<string, ModelStatus> = {
      ready: "available",
      warming: "loading",
      kept: "available",
    };
    const registry = new ModelRegistry(
      [createModel("ready"), createModel("warming"), createModel("kept")],
      (model) =>
        createFakeEngine({
          status: statuses[model.id] ?? "unavailable",
          changed: () => replaced.has(model.id),
        }),
    );
    const before = new Map(registry.list().map((entry) => [entry.model.id, entry.engine]));

    expect(registry.replace([createModel("ready"), createModel("warming"), createModel("kept")])).toEqual([]);

    replaced.add("ready").add("warming");
    const retired = registry.replace([createModel("ready"), createModel("warming"), createModel("kept")]);

    expect(retired).toEqual([before.get("ready"), before.get("warming")]);
    expect(registry.get("ready")?.engine).not.toBe(before.get("ready"));
    expect(registry.get("warming")?.engine).not.toBe(before.get("warming"));
    expect(registry.get("kept")?.engine).toBe(before.get("kept"));
  });

  it("keeps an engine that cannot tell (an upstream) while its configuration is unchanged", () => {
    const registry = new ModelRegistry([createModel("upstream")], () =>
      createFakeEngine({ status: "available" }),
    );
    const engine = registry.get("upstream")?.engine;

    expect(registry.replace([createModel("upstream")])).toEqual([]);
    expect(registry.get("upstream")?.engine).toBe(engine);
  });
});
