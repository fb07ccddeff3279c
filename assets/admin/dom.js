// What every view builds with: elements from text (never from markup), a comment's HTML through
// an inert template and an allow-list, times, links, the announcer and the error line.

import { describe } from './api.js';

// The markup a comment's HTML may hold: what the server's sanitiser lets through, and no more.
const ALLOWED_TAGS = new Set([
  'p', 'br', 'em', 'strong', 'del', 'a', 'code', 'pre', 'blockquote', 'ul', 'ol', 'li', 'hr',
  'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
]);
const ALLOWED_ATTRIBUTES = { a: new Set(['href', 'title', 'rel']), ol: new Set(['start']) };
const ALLOWED_SCHEMES = new Set(['http:', 'https:', 'mailto:']);
// Elements dropped with everything in them (any other unknown element keeps its text).
const DROPPED_TAGS = new Set(['script', 'style', 'iframe', 'object', 'embed', 'template', 'noscript', 'svg', 'math']);
// Headings in a comment are shown as paragraphs: the console's own headings give the outline.
const HEADINGS = new Set(['h1', 'h2', 'h3', 'h4', 'h5', 'h6']);

let ids = 0;

// A new id for an element, unique in the page.
export function uid(prefix) {
  ids += 1;
  return `${prefix}-${ids}`;
}

// Creates an element with attributes (`text`, `class`, or plain attributes; false, null and
// undefined leave one out) and children.
export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) {
      continue;
    }
    if (name === 'text') {
      node.textContent = value;
    } else if (name === 'class') {
      node.className = value;
    } else {
      node.setAttribute(name, value === true ? '' : String(value));
    }
  }
  node.append(...children.filter((child) => child !== undefined && child !== null && child !== false));
  return node;
}

// `html` as a fragment, cleaned against the allow-list: parsed in a template, where nothing
// runs or loads, then every element, attribute and address not allowed is removed.
export function cleanHtml(html) {
  const template = document.createElement('template');
  template.innerHTML = html;
  cleanChildren(template.content);
  return template.content;
}

function cleanChildren(parent) {
  for (const node of [...parent.childNodes]) {
    if (node.nodeType === Node.TEXT_NODE) {
      continue;
    }
    if (node.nodeType !== Node.ELEMENT_NODE) {
      node.remove();
      continue;
    }
    const tag = node.localName;
    if (!(node instanceof HTMLElement) || !ALLOWED_TAGS.has(tag)) {
      if (DROPPED_TAGS.has(tag)) {
        node.remove();
      } else {
        cleanChildren(node);
        node.replaceWith(...node.childNodes);
      }
      continue;
    }
    const allowed = ALLOWED_ATTRIBUTES[tag];
    for (const attribute of [...node.attributes]) {
      if (!allowed?.has(attribute.name)) {
        node.removeAttribute(attribute.name);
      }
    }
    if (tag === 'a') {
      if (!ALLOWED_SCHEMES.has(schemeOf(node.getAttribute('href')))) {
        node.removeAttribute('href');
      }
      node.setAttribute('rel', 'nofollow ugc noopener noreferrer');
    }
    cleanChildren(node);
    if (HEADINGS.has(tag)) {
      const paragraph = document.createElement('p');
      paragraph.append(...node.childNodes);
      node.replaceWith(paragraph);
    }
  }
}

function schemeOf(href) {
  try {
    return href === null ? null : new URL(href).protocol;
  } catch {
    return null;
  }
}

// A `<time>` for an RFC 3339 time, shown in the moderator's locale.
export function time(iso) {
  const date = new Date(iso);
  return el('time', { datetime: iso, text: Number.isNaN(date.getTime()) ? String(iso ?? '') : date.toLocaleString() });
}

// The text of an RFC 3339 time, in the moderator's locale.
export function timeText(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso ?? '') : date.toLocaleString();
}

// A link to a page address when it is http(s), else its text.
export function link(url, text) {
  const scheme = schemeOf(url ?? null);
  if (scheme === 'http:' || scheme === 'https:') {
    return el('a', { href: url, rel: 'noopener noreferrer', target: '_blank', text });
  }
  return el('span', { text });
}

// At most `n` characters of `text`, with an ellipsis when cut.
export function cut(text, n) {
  const chars = Array.from(text ?? '');
  return chars.length > n ? `${chars.slice(0, n).join('')}…` : chars.join('');
}

// Says `message` in the polite live region (a change of text is what a screen reader reads,
// so the same message twice is said twice).
export function announce(message) {
  const announcer = document.getElementById('announcer');
  announcer.textContent = '';
  window.setTimeout(() => {
    announcer.textContent = message;
  }, 50);
}

// Shows what failed, with the error's message and code, until dismissed or replaced.
export function showError(what, err) {
  document.getElementById('error-text').textContent = `${what}: ${describe(err)}`;
  document.getElementById('error').hidden = false;
}

export function clearError() {
  document.getElementById('error').hidden = true;
  document.getElementById('error-text').textContent = '';
}

// Opens a modal dialog whose form closes it with a button's value; resolves with the form's
// fields when it closed with `ok`, else null. Focus goes back to `back` afterwards.
export function ask(dialog, first, back) {
  return new Promise((resolve) => {
    dialog.returnValue = '';
    const form = dialog.querySelector('form');
    form.reset();
    dialog.addEventListener('close', () => {
      const fields = dialog.returnValue === 'ok' ? Object.fromEntries(new FormData(form)) : null;
      if (back?.isConnected) {
        back.focus();
      }
      resolve(fields);
    }, { once: true });
    dialog.showModal();
    first?.focus();
  });
}
