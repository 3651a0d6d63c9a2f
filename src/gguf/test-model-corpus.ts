/**
 * Training text for the test models' byte-level BPE merges: everyday English, chat phrasing,
 * the tool-calling prompt of the chat template, and JSON. Changing it changes every generated
 * model (the vocabulary is derived from it), so treat it as frozen.
 */
export const testModelCorpus = `
Hello! How are you today? I am fine, thank you. What can I do for you?
You are a helpful assistant. Answer the question of the user in a short and clear way.
The user asked about the weather in the city. It is sunny and warm in the morning, and it will
rain in the evening. The temperature is about twenty degrees. Please tell me more about it.
This is a test of the system. The quick brown fox jumps over the lazy dog. What is the time?
There are many things that we can do with this model, but it is only a small test model and
its answers have no meaning. It was made for tests, benchmarks and demos of the service.
Can you help me with my code? Write a function that returns the sum of two numbers.
Sure, here is the answer to your question. Let me know if there is anything else I can do.
I think that the best way to learn is to practice every day. Do not forget to have fun.
Tell me a story about a cat and a dog who live in a small house near the river and the sea.
Once upon a time there was a little girl who wanted to see the world. She went on a long trip.
The first step is to read the file. The second step is to write the result to the output.
Thank you for your message. We will get back to you as soon as possible. Have a nice day!
What is the capital of France? The capital of France is Paris. What about Germany and Italy?
Yes, no, maybe. I don't know. It's true that we're here, they've been there, I'll be back.
The number of tokens in the prompt and in the completion is counted for each request.
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the current weather in a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "The name of the city"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}}}
{"type": "function", "function": {"name": "get_time", "description": "Get the current time", "parameters": {"type": "object", "properties": {}}}}
</tools>

For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>
<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
</tool_call>
<tool_response>
{"temperature": 21, "condition": "sunny", "humidity": 0.4}
</tool_response>
{"name": "Alice", "age": 30, "email": "alice@example.com", "tags": ["admin", "user"], "active": true}
{"id": "item-1", "title": "Hello world", "count": 3, "items": [{"a": "b"}, {"a": "c"}], "value": null}
{"a": "text", "b": "more text", "result": "ok", "error": false, "data": {"key": "value", "list": [1, 2, 3]}}
{"model": "test", "messages": [{"role": "user", "content": "Hello"}, {"role": "assistant", "content": "Hi"}]}
["one", "two", "three"], {"x": 1.5, "y": -2, "z": 0}, {"answer": "yes", "reason": "because"}
`;
