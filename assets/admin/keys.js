// The keyboard: j / k between the queue's comments, a / r / b / h act on the current one, ? lists
// the keys. Nothing happens while typing in a field, with a modifier held, or while a dialog is
// open (Escape closes dialogs and the drawer: they are modal dialogs).

// Inputs that take no typing (the keys still work on a focused checkbox or button).
const NOT_TYPED = new Set(['checkbox', 'radio', 'button', 'submit', 'reset']);
const ACTIONS = { a: 'approve', r: 'reject', b: 'ban', h: 'history' };

// Listens on the document; `view()` names the view shown (null when signed out).
export function bindKeys(queue, view) {
  document.addEventListener('keydown', (event) => {
    if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey || event.isComposing) {
      return;
    }
    if (isTyping(event.target)) {
      return;
    }
    if (view() === null || document.querySelector('dialog[open]')) {
      return;
    }
    if (event.key === '?') {
      event.preventDefault();
      showKeys();
      return;
    }
    if (view() !== 'queue') {
      return;
    }
    if (event.key === 'j' || event.key === 'k') {
      event.preventDefault();
      queue.move(event.key === 'j' ? 1 : -1);
    } else if (ACTIONS[event.key]) {
      event.preventDefault();
      queue.actOnCurrent(ACTIONS[event.key]);
    }
  });
}

// Whether `target` takes typed text.
function isTyping(target) {
  if (!(target instanceof HTMLElement)) {
    return false;
  }
  if (target instanceof HTMLInputElement) {
    return !NOT_TYPED.has(target.type);
  }
  return target instanceof HTMLTextAreaElement || target instanceof HTMLSelectElement || target.isContentEditable;
}

// The dialog listing the keys; focus goes back where it was when it closes.
export function showKeys() {
  const dialog = document.getElementById('keys-dialog');
  const back = document.activeElement;
  dialog.addEventListener('close', () => {
    if (back instanceof HTMLElement && back.isConnected) {
      back.focus();
    }
  }, { once: true });
  dialog.showModal();
  dialog.querySelector('button').focus();
}
