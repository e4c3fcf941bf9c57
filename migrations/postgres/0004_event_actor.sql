-- Who asked for a change through the GraphQL API (a mutation's principal: key:NAME,
-- kubernetes:USER); NULL for changes the sources reported on their own.
ALTER TABLE events ADD COLUMN actor TEXT;
