// Discussions: finding one by id or key, and what moderators change on it: the lock, the
// moderation mode, pins, the storage layout; and the queue filtered to it.

import { ApiError } from './api.js';
import { announce, cut, el, link, showError, uid } from './dom.js';

const DISCUSSION = `id title url key layout commentCount locked moderation
  pinnedComments { slug text deleted author { name } }`;

const BY_ID = `query AdminDiscussion($id: ID!) { discussion(id: $id) { ${DISCUSSION} } }`;
const BY_KEY = `query AdminDiscussionByKey($key: String!) { discussionByKey(key: $key) { ${DISCUSSION} } }`;

const LOCK = `mutation AdminLock($id: ID!, $locked: Boolean!) { lockDiscussion(id: $id, locked: $locked) { ${DISCUSSION} } }`;
const MODERATION = `mutation AdminModeration($id: ID!, $mode: ModerationMode!) { setModeration(id: $id, mode: $mode) { ${DISCUSSION} } }`;
const PIN = `mutation AdminPin($id: ID!, $slug: String!, $pinned: Boolean!) { pinComment(discussionId: $id, slug: $slug, pinned: $pinned) { slug pinned } }`;
const MIGRATE = `mutation AdminMigrate($id: ID!, $layout: StorageLayout!) { migrateDiscussion(id: $id, layout: $layout) { ${DISCUSSION} } }`;

const MODES = [
  ['POST', 'Post-moderated (published at once)'],
  ['PRE', 'Pre-moderated (every comment held)'],
  ['PRE_FIRST', 'First comment of each author held'],
];
const LAYOUTS = [
  ['PER_COMMENT', 'One document per comment'],
  ['EMBEDDED', 'Embedded in the discussion'],
  ['BUCKETED', 'Buckets of comments'],
];
// What an id looks like: anything else is only tried as a key.
const ID_PATTERN = /^[0-9a-f]{24}$/;

// The discussion with the id or key `text`: by id first when it looks like one, then by key.
// An ApiError (NOT_FOUND) when neither finds one.
export async function findDiscussion(api, text) {
  if (ID_PATTERN.test(text)) {
    try {
      const data = await api.run(BY_ID, { id: text });
      if (data.discussion) {
        return data.discussion;
      }
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'NOT_FOUND') {
        throw err;
      }
    }
  }
  const data = await api.run(BY_KEY, { key: text });
  if (!data.discussionByKey) {
    throw new ApiError('no discussion has this id or key', 'NOT_FOUND');
  }
  return data.discussionByKey;
}

export class DiscussionsView {
  // `ctx`: `api`, `filterQueue(discussion)`.
  constructor(ctx) {
    this.ctx = ctx;
    this.discussion = null;
    this.card = document.getElementById('discussion-card');
    this.input = document.getElementById('discussion-find-input');
    document.getElementById('discussion-find').addEventListener('submit', (event) => {
      event.preventDefault();
      this.find(this.input.value.trim());
    });
  }

  async show() {
    if (this.discussion) {
      await this.find(this.discussion.id, true);
    }
  }

  async find(text, quiet = false) {
    if (text === '') {
      return;
    }
    try {
      this.render(await findDiscussion(this.ctx.api, text));
      if (!quiet) {
        announce(`Found the discussion ${this.discussion.title}`);
      }
    } catch (err) {
      showError(`No discussion found for ${JSON.stringify(text)}`, err);
    }
  }

  // Runs a change of the shown discussion; `then(data)` shows its result.
  async change(what, query, variables, then) {
    try {
      const data = await this.ctx.api.run(query, variables);
      await then(data);
      announce(what);
    } catch (err) {
      showError(`Not done: ${what}`, err);
    }
  }

  render(discussion) {
    this.discussion = discussion;
    const id = uid('discussion');
    const fields = el(
      'dl',
      { class: 'fields' },
      el('dt', { text: 'Address' }), el('dd', {}, discussion.url ? link(discussion.url, discussion.url) : 'none'),
      el('dt', { text: 'Key' }), el('dd', { text: discussion.key ?? 'none' }),
      el('dt', { text: 'Id' }), el('dd', { text: discussion.id }),
      el('dt', { text: 'Layout' }), el('dd', { text: discussion.layout }),
      el('dt', { text: 'Comments' }), el('dd', { text: String(discussion.commentCount) }),
      el('dt', { text: 'Locked' }), el('dd', { text: discussion.locked ? 'yes' : 'no' }),
      el('dt', { text: 'Moderation' }), el('dd', { text: discussion.moderation }),
    );

    const lock = el('button', { type: 'button', text: discussion.locked ? 'Unlock' : 'Lock' });
    lock.addEventListener('click', () => this.change(
      `${discussion.locked ? 'Unlocked' : 'Locked'} the discussion ${discussion.title}`,
      LOCK,
      { id: discussion.id, locked: !discussion.locked },
      (data) => this.rerender(data.lockDiscussion, lock),
    ));

    const mode = el('select', { id: `${id}-mode` }, ...MODES.map(([value, label]) =>
      el('option', { value, selected: value === discussion.moderation, text: label })));
    const setMode = el('form', { class: 'row' },
      el('label', { for: `${id}-mode`, text: 'Moderation mode' }), mode,
      el('button', { type: 'submit', text: 'Set mode' }));
    setMode.addEventListener('submit', (event) => {
      event.preventDefault();
      this.change(`Set the moderation of ${discussion.title} to ${mode.value}`, MODERATION,
        { id: discussion.id, mode: mode.value },
        (data) => this.rerender(data.setModeration, `#${id}-mode`));
    });

    const slug = el('input', { type: 'text', id: `${id}-slug`, autocomplete: 'off', required: true });
    const pin = el('form', { class: 'row' },
      el('label', { for: `${id}-slug`, text: 'Pin the comment with slug' }), slug,
      el('button', { type: 'submit', text: 'Pin' }));
    pin.addEventListener('submit', (event) => {
      event.preventDefault();
      this.change(`Pinned ${slug.value.trim()}`, PIN, { id: discussion.id, slug: slug.value.trim(), pinned: true },
        () => this.refresh(`#${id}-slug`));
    });

    const layout = el('select', { id: `${id}-layout` }, ...LAYOUTS.map(([value, label]) =>
      el('option', { value, selected: value === discussion.layout, text: `${value}: ${label}` })));
    const move = el('form', { class: 'row' },
      el('label', { for: `${id}-layout`, text: 'Storage layout' }), layout,
      el('button', { type: 'submit', text: 'Move' }));
    move.addEventListener('submit', (event) => {
      event.preventDefault();
      this.change(`Moved ${discussion.title} to ${layout.value}`, MIGRATE, { id: discussion.id, layout: layout.value },
        (data) => this.rerender(data.migrateDiscussion, `#${id}-layout`));
    });

    const filter = el('button', { type: 'button', text: 'Show its queue' });
    filter.addEventListener('click', () => this.ctx.filterQueue(discussion));

    const pins = discussion.pinnedComments.length
      ? el('ul', { class: 'pins', 'aria-labelledby': `${id}-pins` }, ...discussion.pinnedComments.map((comment) => {
        const unpin = el('button', { type: 'button', text: 'Unpin', 'aria-label': `Unpin ${comment.slug}` });
        unpin.addEventListener('click', () => this.change(`Unpinned ${comment.slug}`, PIN,
          { id: discussion.id, slug: comment.slug, pinned: false }, () => this.refresh(`#${id}-slug`)));
        const text = comment.deleted || comment.text === null ? '(deleted)' : cut(comment.text, 120);
        return el('li', {}, el('code', { text: comment.slug }), ` by ${comment.author?.name ?? ''}: ${text} `, unpin);
      }))
      : el('p', { class: 'muted', text: 'No pinned comments.' });

    this.card.replaceChildren(
      el('h3', { id: `${id}-title`, text: discussion.title }),
      fields,
      el('div', { class: 'row' }, lock, filter),
      setMode,
      el('h3', { id: `${id}-pins`, text: 'Pinned comments' }),
      pins,
      pin,
      move,
    );
    this.card.hidden = false;
  }

  // Shows the discussion as changed, focus back on the control that changed it (an element,
  // or a selector of the new card).
  rerender(discussion, control) {
    this.render(discussion);
    const target = typeof control === 'string'
      ? this.card.querySelector(control)
      : [...this.card.querySelectorAll('button')].find((b) => b.textContent === (discussion.locked ? 'Unlock' : 'Lock'));
    target?.focus();
  }

  async refresh(control) {
    const data = await this.ctx.api.run(BY_ID, { id: this.discussion.id });
    this.rerender(data.discussion, control);
  }
}
