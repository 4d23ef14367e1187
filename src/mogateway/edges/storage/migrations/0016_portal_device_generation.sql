-- A portal person's device cookies (api/portal/devices.py) are signed over this number: disabling the
-- person, "sign out everywhere" and setting a password (an accepted invite) add one, so every device
-- cookie signed before no longer lets its browser past the account's sign-in throttle. The cookie
-- itself is never stored. Rows from before this migration start at 0, as the cookies signed from now.
ALTER TABLE portal_users ADD COLUMN device_generation bigint NOT NULL DEFAULT 0;
