// Record names from user strings (thread ids, namespaces, keys): each
// becomes one safe path segment, reversibly. "~" stands for the empty
// string; every character outside [A-Za-z0-9_-] is %-escaped, so no
// segment is "." or ".." and none holds "/" or a control character.

/** seg encodes s as one name segment. */
export function seg(s: string): string {
  if (s === "") return "~";
  return encodeURIComponent(s).replace(/[.!~*'()]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

/** unseg decodes a segment made by seg. */
export function unseg(s: string): string {
  return s === "~" ? "" : decodeURIComponent(s);
}
