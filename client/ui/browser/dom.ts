/**
 * The few DOM helpers the page is built with. Everything from the API goes in as text
 * (`textContent`, attribute values): nothing it returns is ever parsed as HTML.
 */

/**
 * The page's element matching `selector`. The page (client/ui/page.ts) has every element the
 * script asks for, so a miss is a bug in the script: it throws rather than carry on with nothing.
 *
 * @example $<HTMLButtonElement>('#cancel').disabled = true;
 */
export function $<E extends Element = HTMLElement>(selector: string): E {
  const found = document.querySelector<E>(selector);
  if (!found) throw new Error(`the job browser's page has no ${selector}`);
  return found;
}

/** Calls `handler` on `event` of the page's element matching `selector`. */
export function on(selector: string, event: string, handler: (e: Event) => void): void {
  $(selector).addEventListener(event, handler);
}

/** `text` becomes the element's text, `class` its class; any other key an attribute. */
export type Attributes = { readonly text?: string; readonly class?: string } & Readonly<Record<string, string>>;
/** A child: an element, or text; `null` and `undefined` are left out. */
export type Child = Node | string | null | undefined;

/**
 * A new element with its attributes and children.
 *
 * @example el('td', { class: 'mono', text: job.jobId })
 */
export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attributes = {},
  kids: readonly Child[] = [],
): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === 'text') e.textContent = value;
    else if (name === 'class') e.className = value;
    else e.setAttribute(name, value);
  }
  for (const kid of kids) if (kid != null) e.append(kid);
  return e;
}

/** A job's or a schedule's state as a coloured badge (the page's CSS colours `.state.<STATE>`). */
export function stateBadge(state: string | undefined): HTMLSpanElement {
  return el('span', { class: `state ${state ?? ''}`, text: state || '-' });
}

/** How a message box looks: `.msg.info`, `.msg.ok`, `.msg.err` in the page's CSS. */
export type MessageKind = 'info' | 'ok' | 'err';

/** Shows `text` in the message box `selector`; an empty text hides it (`.msg:empty`). */
export function showMessage(selector: string, kind: MessageKind, text = ''): void {
  const box = $(selector);
  box.className = `msg ${kind}`;
  box.textContent = text;
}

/**
 * The value of the field `name` of a form (an input or a select).
 *
 * @example fieldValue($<HTMLFormElement>('#filters'), 'state') // 'QUEUED', or '' for any
 */
export function fieldValue(form: HTMLFormElement, name: string): string {
  const field = form.elements.namedItem(name);
  if (!(field instanceof HTMLInputElement || field instanceof HTMLSelectElement))
    throw new Error(`the form #${form.id} has no field ${name}`);
  return field.value;
}

/** Text for a value of any JSON type: strings as they are, the rest as JSON. */
export function asText(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? '');
}
