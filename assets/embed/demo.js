// The demo page's mount (/embed/demo?key=…): the discussion of the key in the page's
// `data-key`, signed in with the token typed into the page, if any.
import { mount } from './threadql.js';

const target = document.getElementById('comments');
if (target) {
  const tokenInput = document.getElementById('token');
  mount(target, {
    key: target.dataset.key,
    title: `Demo: ${target.dataset.key}`,
    token: () => tokenInput?.value.trim() || null,
  });
}
