/** Whether a tool call's arguments hold nothing but JSON white space. */
export function isBlank(text: string): boolean {
  return /^[ \t\n\r]*$/.test(text);
}
