/**
 * HTML building for the status page. Every interpolated value is escaped unless it is already
 * SafeHtml, so text from asset names, versions or error messages can never become markup.
 */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** C0 controls (bar tab, LF, CR) and DEL are not valid in HTML text; show them as U+FFFD. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is the point
const CONTROL = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g;

/** Escapes text for HTML element content and double- or single-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(CONTROL, '\ufffd').replace(/[&<>"']/g, (c) => ESCAPES[c]!);
}

/** Markup that is already safe: built by `html` or explicitly trusted with `raw`. */
export class SafeHtml {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export type HtmlValue = SafeHtml | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof SafeHtml) return value.value;
  if (Array.isArray(value)) return value.map(render).join('');
  return escapeHtml(String(value));
}

/** Tagged template: literal parts are trusted, interpolations are escaped (arrays are joined). */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): SafeHtml {
  let out = strings[0] ?? '';
  values.forEach((value, i) => {
    out += render(value) + (strings[i + 1] ?? '');
  });
  return new SafeHtml(out);
}

/** Trusts markup produced by this module's callers (never pass user text here). */
export function raw(markup: string): SafeHtml {
  return new SafeHtml(markup);
}

/** A query-string link relative to the page; values are URL-encoded, then HTML-escaped by `html`. */
export function pageHref(params: Record<string, string | number | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== undefined) search.set(name, String(value));
  }
  const text = search.toString();
  return text === '' ? '/' : `/?${text}`;
}
