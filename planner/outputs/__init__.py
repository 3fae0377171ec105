"""What people take away: the self-contained HTML report and the generated script and
notebook. The top layer beside the command line.
"""
