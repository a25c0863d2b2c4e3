"""Workspaces: mirror local project directories into what a job runs."""
