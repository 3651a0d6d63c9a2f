import type { ChatRequest } from "../engine.ts";
import { checkPromptSize, checkTemplateTokens, documentedToolTexts } from "./check-prompt-size.ts";
import type { LoadedLlamaModel } from "./load-llama-model.ts";
import type { ChatTemplateMeasures } from "./measure-chat-template.ts";
import { type PlannedGeneration, planGeneration } from "./plan-generation.ts";

/**
 * The request's plan, once its messages and tools are known to fit the context as far as can be
 * told without rendering them.
 */
export async function planWithinSize(
  request: ChatRequest,
  current: { loaded: LoadedLlamaModel; template: ChatTemplateMeasures },
): Promise<PlannedGeneration> {
  const { loaded } = current;
  // Tens of thousands of messages or tool calls are refused before they are converted; the
  // tools and formats first, as their errors come before the context's.
  try {
    checkTemplateTokens({
      messages: request.messages,
      contextLength: loaded.contextLength,
      maxTokens: request.maxTokens,
      templateTokensPerItem: current.template.tokensPerItem,
      templateTokensPerCall: current.template.tokensPerCall,
    });
  } catch (error) {
    planGeneration({ ...request, messages: [] });
    throw error;
  }
  const planned = planGeneration(request);
  const { plan, history } = planned;
  // Megabytes of messages or tools, or tens of thousands of messages, are refused without
  // holding the event loop (check-prompt-size.ts).
  await checkPromptSize({
    messages: request.messages,
    tokenizer: loaded.model.tokenizer,
    contextLength: loaded.contextLength,
    maxTokens: request.maxTokens,
    // A forced call's tools are in its instruction, whole (plan-generation.ts).
    toolTexts:
      planned.instruction !== undefined
        ? [planned.instruction]
        : plan.kind === "functions"
          ? documentedToolTexts(
              Object.entries(plan.functions).map(([name, documented]) => ({
                name,
                description: documented.description,
                parameters: documented.params,
              })),
              { parametersAsJson: current.template.documentsParametersAsJson },
            )
          : [],
    // The reply the prompt opens is an item too, unless the history ends in one (render-prompt.ts).
    historyItems: history.at(-1)?.type === "model" ? history.length : history.length + 1,
    templateTokensPerItem: current.template.tokensPerItem,
    templateTokensPerCall: current.template.tokensPerCall,
  });
  return planned;
}
