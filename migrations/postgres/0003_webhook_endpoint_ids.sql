-- Webhook URLs are secrets (chat-style webhooks carry their key in the path or the query). From
-- this version on, deliveries record an endpoint id (scheme, host and a short digest of the URL)
-- and error texts without the URL. Rows written before kept the whole URL and errors that could
-- quote it: both are blanked.
UPDATE webhook_deliveries SET endpoint = 'unrecorded (before migration 0003)';
UPDATE webhook_deliveries SET last_error = 'unrecorded (before migration 0003)' WHERE last_error IS NOT NULL;
