import type { CatalogModel } from "../catalog/catalog.ts";
import { parseAmount } from "./money.ts";

/** A chat model's prices per million tokens, in nano-units. */
export interface ChatPrices {
  inputPerMillionNano: bigint;
  outputPerMillionNano: bigint;
}

/**
 * The chat prices of catalogue models, parsed from their decimal strings once per entry: each
 * admission and settle reads them. Kept by entry, not by id: a reload makes new entries, whose
 * prices are parsed anew, while a request admitted before it is charged at the prices it reserved.
 */
export class ChatPriceList {
  readonly #prices = new WeakMap<CatalogModel, ChatPrices>();

  of(model: CatalogModel): ChatPrices {
    let prices = this.#prices.get(model);
    if (prices === undefined) {
      if (model.pricing.kind !== "chat") throw new Error(`model ${model.id} has no chat prices`);
      prices = {
        inputPerMillionNano: parseAmount(model.pricing.inputPerMillion),
        outputPerMillionNano: parseAmount(model.pricing.outputPerMillion),
      };
      this.#prices.set(model, prices);
    }
    return prices;
  }
}
