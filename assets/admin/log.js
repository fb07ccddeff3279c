// The moderation log, newest first, filtered by action and moderator, paged by "Load more".

import { el, showError, timeText } from './dom.js';

const PAGE_SIZE = 25;

const LOG_QUERY = `query AdminLog($first: Int!, $after: String, $action: ModerationAction, $moderator: ID) {
  moderationLog(first: $first, after: $after, action: $action, moderatorId: $moderator) {
    pageInfo { hasNextPage endCursor }
    nodes { id at moderator { id name } action discussionId slug userId reason detail }
  }
}`;

export class LogView {
  constructor(ctx) {
    this.ctx = ctx;
    this.page = null;
    this.filters = { action: null, moderator: null };
    this.rows = document.getElementById('log-rows');
    this.table = document.getElementById('log-table');
    this.empty = document.getElementById('log-empty');
    this.more = document.getElementById('log-more');
    this.more.addEventListener('click', () => this.load(false));
    document.getElementById('log-filter').addEventListener('submit', (event) => {
      event.preventDefault();
      this.filters = {
        action: document.getElementById('log-action').value || null,
        moderator: document.getElementById('log-moderator').value.trim() || null,
      };
      this.load(true);
    });
  }

  async show() {
    await this.load(true);
  }

  // Reads the first page (`fresh`) or the next one, appended.
  async load(fresh) {
    this.more.disabled = true;
    try {
      const data = await this.ctx.api.run(LOG_QUERY, {
        first: PAGE_SIZE,
        after: fresh ? null : this.page?.endCursor,
        ...this.filters,
      });
      if (fresh) {
        this.rows.replaceChildren();
      }
      for (const entry of data.moderationLog.nodes) {
        this.rows.append(this.render(entry));
      }
      this.page = data.moderationLog.pageInfo;
      this.more.hidden = !this.page.hasNextPage;
      this.table.hidden = this.rows.children.length === 0;
      this.empty.hidden = this.rows.children.length > 0;
    } catch (err) {
      showError('The moderation log could not be read', err);
    } finally {
      this.more.disabled = false;
    }
  }

  render(entry) {
    return el(
      'tr',
      { 'data-id': entry.id },
      el('td', { text: timeText(entry.at) }),
      el('td', { text: `${entry.moderator?.name ?? ''} (${entry.moderator?.id ?? ''})` }),
      el('td', { text: entry.action }),
      el('td', { text: entry.discussionId ?? '' }),
      el('td', { text: entry.slug ?? '' }),
      el('td', { text: entry.userId ?? '' }),
      el('td', { text: entry.reason ?? '' }),
      el('td', { text: entry.detail ?? '' }),
    );
  }
}
