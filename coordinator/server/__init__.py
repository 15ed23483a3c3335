"""The process and its sockets: the server lifecycle, listeners, connections, the node that ties
the rooms together, the admin endpoint, the workers supervisor and its link."""
