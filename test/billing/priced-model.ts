import type { CatalogModel } from "../../src/catalog/catalog.ts";

/** A chat model at 1.00 per million tokens in and out: 1,000 nano-units a token. */
export const pricedModel: CatalogModel = {
  id: "priced",
  kind: "chat",
  ownedBy: "test",
  pricing: { kind: "chat", inputPerMillion: "1.00", outputPerMillion: "1.00" },
  contextLength: 1000,
  created: 1_700_000_000,
  engine: undefined,
};
