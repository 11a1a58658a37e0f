"""Recurring schedules (see :mod:`.table`)."""
