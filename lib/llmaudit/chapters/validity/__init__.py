"""Audit validity (main paper §5): does the gender vector match real-world name gender, does an implicit
name signal reproduce the white-box finding, and does perturbing gender leave the other variables' influence alone?"""
