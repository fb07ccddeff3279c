// GraphiQL at /: mounted by the page (src/graphiql.html) from a file of its own, so the page
// runs no inline script and its Content-Security-Policy allows scripts from this server only.
// Queries and mutations go to this server's /graphql over HTTP; subscriptions over a
// WebSocket (graphql-transport-ws) to the same path, opened only when one is run.
const socket = location.protocol === 'https:' ? 'wss:' : 'ws:';
const fetcher = GraphiQL.createFetcher({
  url: '/graphql',
  subscriptionUrl: socket + '//' + location.host + '/graphql',
});

const defaultQuery = `# threadql: threaded comments over GraphQL. Reads need no token.
#
# To post, edit or delete, mint a token:
#   threadql token --sub ID --name NAME
# and put it in the Headers tab below as
#   {"Authorization": "Bearer <token>"}
#
# Run a query with the ▶ button or Ctrl-Enter.

{
  discussions(first: 5) {
    nodes {
      id
      title
      comments(order: THREADED, first: 10) {
        nodes {
          slug
          depth
          text
          author {
            name
          }
        }
      }
    }
  }
}
`;

ReactDOM.createRoot(document.getElementById('graphiql')).render(
  React.createElement(GraphiQL, {
    fetcher,
    defaultQuery,
    defaultEditorToolsVisibility: 'headers',
  }),
);
